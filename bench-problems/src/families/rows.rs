//! Rows of a 2-D table read straight from its tensor's little-endian bytes: an oracle decodes
//! only the rows it looks up (a `full` table is up to 8 GiB, its lookups a small share of it),
//! each value exactly as the whole-tensor conversions of `data_gen::HostTensor` give it
//! (`to_f32_vec`, `to_f64_vec`), so results stay bit for bit what they were.
use crate::error::ProblemError;
use data_gen::{DType, HostTensor};
use half::{bf16, f16};
use std::sync::OnceLock;

/// The rows of a 2-D tensor [rows, width] as its bytes.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a> {
    bytes: &'a [u8],
    dtype: DType,
    width: usize,
}

impl<'a> Rows<'a> {
    /// The rows of `tensor` (2-D: [rows, width]).
    pub fn of(problem: &str, name: &str, tensor: &'a HostTensor) -> Result<Self, ProblemError> {
        let [_, width] = tensor.shape[..] else {
            return Err(ProblemError::invalid(
                problem,
                format!("`{name}` has shape {:?}, not [rows, width]", tensor.shape),
            ));
        };
        Ok(Rows {
            bytes: &tensor.bytes,
            dtype: tensor.dtype,
            width,
        })
    }

    /// Any tensor of `rows` × `width` elements as `rows` rows of `width` (e.g. a [B, F, D]
    /// tensor as B rows of F·D: one sample each).
    pub fn flat(
        problem: &str,
        name: &str,
        tensor: &'a HostTensor,
        rows: usize,
        width: usize,
    ) -> Result<Self, ProblemError> {
        if tensor.numel() != rows * width {
            return Err(ProblemError::invalid(
                problem,
                format!(
                    "`{name}` has shape {:?}, not {rows} rows of {width}",
                    tensor.shape
                ),
            ));
        }
        Ok(Rows {
            bytes: &tensor.bytes,
            dtype: tensor.dtype,
            width,
        })
    }

    /// Tensor `name` of an input set as rows.
    pub fn named(
        problem: &str,
        inputs: &'a crate::input_set::InputSet,
        name: &str,
    ) -> Result<Self, ProblemError> {
        Self::of(problem, name, inputs.tensors.get(name)?)
    }

    /// Elements per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The bytes of row `r` (panics past the last row, as indexing the decoded tensor did).
    #[inline]
    pub fn bytes(&self, r: usize) -> &'a [u8] {
        let stride = self.width * self.dtype.size_bytes();
        &self.bytes[r * stride..(r + 1) * stride]
    }

    /// Row `r` into `out` (`width` values) as `HostTensor::to_f32_vec` reads its elements.
    #[inline]
    pub fn f32_into(&self, r: usize, out: &mut [f32]) {
        let row = self.bytes(r);
        match self.dtype {
            DType::F32 => decode::<4, f32>(row, out, f32::from_le_bytes),
            DType::BF16 => decode::<2, f32>(row, out, |b| bf16::from_le_bytes(b).to_f32()),
            DType::F16 => decode::<2, f32>(row, out, |b| f16::from_le_bytes(b).to_f32()),
            DType::F64 => decode::<8, f32>(row, out, |b| f64::from_le_bytes(b) as f32),
            DType::I64 => decode::<8, f32>(row, out, |b| i64::from_le_bytes(b) as f32),
            DType::I32 => decode::<4, f32>(row, out, |b| i32::from_le_bytes(b) as f32),
            DType::U8 => decode::<1, f32>(row, out, |b| f32::from(b[0])),
        }
    }

    /// Row `r` into `out` (`width` values) as `HostTensor::to_f64_vec` reads its elements.
    #[inline]
    pub fn f64_into(&self, r: usize, out: &mut [f64]) {
        let row = self.bytes(r);
        match self.dtype {
            DType::F32 => decode::<4, f64>(row, out, |b| f64::from(f32::from_le_bytes(b))),
            DType::BF16 => decode::<2, f64>(row, out, |b| f64::from(bf16::from_le_bytes(b))),
            DType::F16 => {
                let lut = f16_lut();
                decode::<2, f64>(row, out, |b| lut[u16::from_le_bytes(b) as usize])
            }
            DType::F64 => decode::<8, f64>(row, out, f64::from_le_bytes),
            DType::I64 => decode::<8, f64>(row, out, |b| i64::from_le_bytes(b) as f64),
            DType::I32 => decode::<4, f64>(row, out, |b| f64::from(i32::from_le_bytes(b))),
            DType::U8 => decode::<1, f64>(row, out, |b| f64::from(b[0])),
        }
    }
}

/// `out[i] = f(bytes of element i)` over a row of `N`-byte elements.
#[inline(always)]
fn decode<const N: usize, T>(row: &[u8], out: &mut [T], f: impl Fn([u8; N]) -> T) {
    debug_assert_eq!(row.len(), out.len() * N);
    for (o, b) in out.iter_mut().zip(row.chunks_exact(N)) {
        *o = f(b.try_into().expect("N bytes"));
    }
}

/// Every fp16 bit pattern as f64 (`half`'s own conversion, so bit-identical to it; 512 KiB,
/// built once): decoding by table is several times quicker than `f16::to_f64` per element.
pub fn f16_lut() -> &'static [f64] {
    static LUT: OnceLock<Vec<f64>> = OnceLock::new();
    LUT.get_or_init(|| (0..=u16::MAX).map(|b| f16::from_bits(b).to_f64()).collect())
}

/// Little-endian i64 element `i` of `bytes`.
#[inline]
pub fn i64_at(bytes: &[u8], i: usize) -> i64 {
    i64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> Vec<f32> {
        let mut v: Vec<f32> = (0..60).map(|i| (i as f32 - 30.0) * 0.37).collect();
        v.extend([
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            1e-40,
        ]);
        v
    }

    /// Every dtype's rows decode to the values the whole-tensor conversions give, bit for bit.
    #[test]
    fn rows_decode_as_the_whole_tensor_conversions() {
        let v = values();
        let (rows, width) = (v.len() / 6, 6);
        let tensors = [
            HostTensor::from_f32(vec![rows, width], v.clone()).unwrap(),
            HostTensor::from_f64(vec![rows, width], v.iter().map(|&x| x as f64).collect()).unwrap(),
            HostTensor::from_bf16(
                vec![rows, width],
                v.iter().map(|&x| bf16::from_f32(x)).collect(),
            )
            .unwrap(),
            HostTensor::from_f16(
                vec![rows, width],
                v.iter().map(|&x| f16::from_f32(x)).collect(),
            )
            .unwrap(),
            HostTensor::from_i64(
                vec![rows, width],
                (0..v.len() as i64).map(|i| i * 7 - 99).collect(),
            )
            .unwrap(),
            HostTensor::from_i32(
                vec![rows, width],
                (0..v.len() as i32).map(|i| 5 - i).collect(),
            )
            .unwrap(),
            HostTensor::from_u8(
                vec![rows, width],
                (0..v.len() as u8).map(|i| i * 3).collect(),
            )
            .unwrap(),
        ];
        // Every fp16 bit pattern, NaN payloads included.
        let all_f16 = HostTensor::new(
            DType::F16,
            vec![1 << 12, 16],
            (0..=u16::MAX)
                .flat_map(u16::to_le_bytes)
                .collect::<Vec<u8>>(),
        )
        .unwrap();
        for t in tensors.iter().chain([&all_f16]) {
            let r = Rows::of("p", "w", t).unwrap();
            let (f32s, f64s) = (t.to_f32_vec(), t.to_f64_vec());
            let w = r.width();
            let (mut a, mut b) = (vec![0f32; w], vec![0f64; w]);
            for row in 0..t.shape[0] {
                r.f32_into(row, &mut a);
                r.f64_into(row, &mut b);
                let want = row * w..(row + 1) * w;
                assert_eq!(
                    (bits(&a, f32::to_bits), bits(&b, f64::to_bits)),
                    (
                        bits(&f32s[want.clone()], f32::to_bits),
                        bits(&f64s[want], f64::to_bits)
                    ),
                    "{:?} row {row}",
                    t.dtype
                );
            }
        }
    }

    /// The bit patterns of `values`.
    fn bits<T: Copy, B>(values: &[T], to_bits: fn(T) -> B) -> Vec<B> {
        values.iter().map(|&x| to_bits(x)).collect()
    }

    #[test]
    fn rows_need_a_2d_tensor_and_stop_at_the_last_row() {
        let flat = HostTensor::from_f32(vec![4], vec![0.0, 1.0, 2.0, 3.0]).unwrap();
        assert!(Rows::of("p", "w", &flat).is_err());
        assert!(Rows::flat("p", "w", &flat, 3, 2).is_err());
        let pairs = Rows::flat("p", "w", &flat, 2, 2).unwrap();
        let mut row = [0.0f64; 2];
        pairs.f64_into(1, &mut row);
        assert_eq!(row, [2.0, 3.0]);
        let t = HostTensor::from_i64(vec![2, 2], vec![1, -2, 3, 4]).unwrap();
        let r = Rows::of("p", "w", &t).unwrap();
        assert_eq!(
            (r.width(), r.dtype(), r.bytes(1).len()),
            (2, DType::I64, 16)
        );
        assert_eq!(i64_at(r.bytes(0), 1), -2);
        assert!(std::panic::catch_unwind(|| r.bytes(2).len()).is_err());
    }
}
