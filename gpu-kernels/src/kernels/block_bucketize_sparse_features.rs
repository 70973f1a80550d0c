//! Problem 8, `block_bucketize_sparse_features`: row-wise sharding of a keyed jagged tensor's
//! ids to W ranks (FBGEMM's `block_bucketize_sparse_features` with `sequence=True`).
//!
//! The eager `Model` of `08_block_bucketize_sparse_features.py` is all generic ATen kernels, so
//! the reference plan is made of the ports in [`torch_ops`](super::torch_ops),
//! [`kjt_permute`](super::kjt_permute) (`repeat_interleave`), [`scan`](super::scan) and
//! [`radix_sort`](super::radix_sort), launch for launch:
//! ```text
//! seg = torch.repeat_interleave(lengths.view(-1), output_size=N)  # cast + scan, aten_repeat_interleave_i32
//! blk = block_sizes[seg // B]                                     # aten_floor_divide_scalar_i32, aten_index_i64_by_i32
//! q = indices // blk                                              # aten_floor_divide_i64
//! small = q < W                                                   # aten_lt_scalar_i64
//! rank = torch.where(small, q, indices % W)                       # aten_remainder_scalar_i64, aten_where_i64
//! new_id = torch.where(small, indices - q * blk, indices // W)    # aten_mul_i64, aten_sub_i64,
//!                                                                 # aten_floor_divide_scalar_i64, aten_where_i64
//! key = rank * (T * B) + seg                                      # aten_mul_scalar_i64, aten_add_i64_i32
//! new_lengths = torch.bincount(key, minlength=W*T*B).to(int32)    # min and max reductions (two stages each),
//!                                                                 # aten_fill_i64, aten_histogram_i64, aten_cast_i64_to_i32
//! order = torch.argsort(rank, stable=True)                        # aten_arange_with_index_i64 + radix sort (8 passes)
//! unbucketize = empty_like(order).scatter_(0, order, arange(N))   # aten_arange_with_index_i64, aten_scatter_i64
//! new_id[order], weights[order]                                   # aten_index_i64, aten_index_f32
//! ```
//! The test below runs the rank / new-id part on ids around the block boundaries and checks it
//! against FBGEMM's rule (below `W·block_size`: rank `id / block_size`, new id
//! `id - rank·block_size`; from there on: rank `id % W`, new id `id / W`).

#[cfg(test)]
mod tests {
    use crate::kernels::torch_ops::tests::ew;
    use crate::kernels::torch_ops::*;

    #[test]
    fn eager_formula_follows_fbgemms_bucketize_rule() {
        let w = 8i64;
        // Ids of three features around their block boundaries, past the last block included.
        let block = [10i64, 1, 1000];
        let mut ids = Vec::new();
        let mut blk = Vec::new();
        for &bs in &block {
            for id in [
                0,
                1,
                bs - 1,
                bs,
                bs + 1,
                w * bs - 1,
                w * bs,
                w * bs + 1,
                w * bs + 7,
                5 * w * bs + 3,
                1 << 40,
            ] {
                ids.push(id);
                blk.push(bs);
            }
        }
        let n = ids.len();
        let (mut q, mut rem, mut rank, mut qb, mut low, mut high, mut new_id) = (
            vec![0i64; n],
            vec![0i64; n],
            vec![0i64; n],
            vec![0i64; n],
            vec![0i64; n],
            vec![0i64; n],
            vec![0i64; n],
        );
        let mut small = vec![0u8; n];
        let nn = n as u64;
        unsafe {
            ew(n)
                .ptr_mut(&mut q)
                .ptr(&ids)
                .ptr(&blk)
                .arg(nn)
                .run(&aten_floor_divide_i64::EMU);
            ew(n)
                .ptr_mut(&mut small)
                .ptr(&q)
                .arg(w)
                .arg(nn)
                .run(&aten_lt_scalar_i64::EMU);
            ew(n)
                .ptr_mut(&mut rem)
                .ptr(&ids)
                .arg(w)
                .arg(nn)
                .run(&aten_remainder_scalar_i64::EMU);
            ew(n)
                .ptr_mut(&mut rank)
                .ptr(&small)
                .ptr(&q)
                .ptr(&rem)
                .arg(nn)
                .run(&aten_where_i64::EMU);
            ew(n)
                .ptr_mut(&mut qb)
                .ptr(&q)
                .ptr(&blk)
                .arg(nn)
                .run(&aten_mul_i64::EMU);
            ew(n)
                .ptr_mut(&mut low)
                .ptr(&ids)
                .ptr(&qb)
                .arg(nn)
                .run(&aten_sub_i64::EMU);
            ew(n)
                .ptr_mut(&mut high)
                .ptr(&ids)
                .arg(w)
                .arg(nn)
                .run(&aten_floor_divide_scalar_i64::EMU);
            ew(n)
                .ptr_mut(&mut new_id)
                .ptr(&small)
                .ptr(&low)
                .ptr(&high)
                .arg(nn)
                .run(&aten_where_i64::EMU)
        };
        for i in 0..n {
            let (id, bs) = (ids[i], blk[i]);
            let (r, nid) = if id < w * bs {
                (id / bs, id - (id / bs) * bs)
            } else {
                (id % w, id / w)
            };
            assert_eq!((rank[i], new_id[i]), (r, nid), "id {id}, block {bs}");
        }
    }
}
