"""The workloads that tools/profile_workload.py profiles: complete model steps on synthetic data,
one GPU, no downloads. Imports torch (the CLI imports this module only when it profiles).

Every workload has `step()` (one training or inference step) and `description`. The operations
that correspond to a suite problem run inside `regions(problem)`, a `record_function`
named `dlrm_bench::<problem>` that also records the autograd sequence numbers of the nodes
created inside it (kernel_classes.py attributes the backward by them). Where a problem's own
KernelBench `Model` is that operation it is used as is (problems 1, 5, 6, 10, 12).

With `compile`, the dense parts (MLPs, cross layers, towers, transformer blocks, losses) are
`torch.compile`d; the problems' operations stay eager inside their regions (the projection's
speedups are over eager, and production recommender stacks keep the sparse part out of the
compiled graph too); the GPT step is compiled whole.
"""

import contextlib
import importlib.util
import math
import pathlib

import torch
import torch.nn as nn
import torch.nn.functional as F

KERNELBENCH = pathlib.Path(__file__).resolve().parent.parent / "bench-problems" / "kernelbench"
REGION_PREFIX = "dlrm_bench::"
DEV = "cuda"

# REFERENCE-DATA.md: MLPerf DLRMv2 (D = 128) and Criteo Kaggle (D = 16).
DLRMV2_ROWS = [40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282,
               10, 2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973,
               108, 36]
DLRMV2_HOT = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]
KAGGLE_ROWS = [1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
               27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572]


def problem_model(number):
    path = next(KERNELBENCH.glob(f"{number:02d}_*.py"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Model()


class Regions:
    """`with regions("dot_interaction"):` marks a problem's operation for the profiler and keeps
    (s0, s1, problem): autograd nodes created inside have s0 < sequence number < s1 (sequence
    numbers are per thread and increase; a probe node on a CPU scalar reads them)."""

    def __init__(self):
        self.intervals = []
        self._probe = torch.zeros((), requires_grad=True)
        self.sequence_numbers = hasattr((self._probe * 1.0).grad_fn, "_sequence_nr")

    def _seq(self):
        if not (self.sequence_numbers and torch.is_grad_enabled()):
            return None
        return int((self._probe * 1.0).grad_fn._sequence_nr())

    @contextlib.contextmanager
    def __call__(self, problem):
        s0 = self._seq()
        with torch.profiler.record_function(REGION_PREFIX + problem):
            yield
        s1 = self._seq()
        if s0 is not None and s1 is not None and s1 > s0 + 1:
            self.intervals.append((s0, s1, problem))


def table(rows, dim, dtype=torch.float32):
    """A table filled cheaply on the GPU (uniform, no randn on 40M rows)."""
    w = torch.empty(rows, dim, device=DEV, dtype=dtype)
    w.uniform_(-0.05, 0.05)
    return w


def skewed(rows, n, skew):
    """n ids in [0, rows): floor(u^skew * rows), hot rows first."""
    u = torch.rand(n, device=DEV)
    return (u.pow(skew) * rows).long().clamp_(max=rows - 1)


def mlp(sizes, last_relu):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if last_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).to(DEV)


def maybe_compile(fn, enabled):
    return torch.compile(fn, dynamic=False) if enabled else fn


class SparseArch:
    """Embedding tables looked up by problem 1's Model (sum bags, one call per table, inside
    `embedding_bag_sum`) and, in training, updated by problem 5's Model (backward + row-wise
    Adagrad, per table, inside `embedding_backward_rowwise_adagrad`), as MLPerf DLRMv2 trains
    its tables with row-wise Adagrad. The pooled output is [T, B, D]."""

    def __init__(self, regions, rows, hot, dim, batch, skew, train, ids=None):
        self.r = regions
        self.lookup = problem_model(1)
        self.update_model = problem_model(5) if train else None
        self.weights = [table(n, dim) for n in rows]
        self.momenta = [torch.zeros(n, device=DEV) for n in rows] if train else None
        if ids is None:
            ids = [(skewed(n, batch * h, skew),
                    torch.arange(batch + 1, device=DEV, dtype=torch.int64) * h)
                   for n, h in zip(rows, hot)]
        self.ids = ids
        self.lookups = sum(int(i.numel()) for i, _ in ids)

    def forward(self):
        with self.r("embedding_bag_sum"), torch.no_grad():
            pooled = [self.lookup(w, i, o) for w, (i, o) in zip(self.weights, self.ids)]
        return torch.stack(pooled, 0)

    def update(self, grad, lr=0.01, eps=1e-8):
        with self.r("embedding_backward_rowwise_adagrad"), torch.no_grad():
            for t, (w, m, (i, o)) in enumerate(zip(self.weights, self.momenta, self.ids)):
                self.update_model(grad[t], i, o, w, m, lr, eps)


def _capped(rows, cap):
    return [min(n, cap) for n in rows]


class DLRM:
    """DLRM (facebookresearch/dlrm) with the MLPerf DLRMv2 tables and dot interaction."""

    def __init__(self, a, regions, train, compile_):
        B, D, T = a.batch, 128, len(DLRMV2_ROWS)
        self.r, self.train = regions, train
        self.sparse = SparseArch(regions, _capped(DLRMV2_ROWS, a.cap), DLRMV2_HOT, D, B, a.skew,
                                 train)
        self.bottom = mlp([13, 512, 256, D], last_relu=True)
        self.top = mlp([D + T * (T + 1) // 2, 1024, 1024, 512, 256, 1], last_relu=False)
        self.interact = problem_model(10)
        self.dense = torch.randn(B, 13, device=DEV)
        self.labels = torch.randint(0, 2, (B, 1), device=DEV).float()
        self.bottom_fn = maybe_compile(self.bottom, compile_)
        self.loss_fn = maybe_compile(
            lambda z, y: F.binary_cross_entropy_with_logits(self.top(z), y), compile_)
        self.top_fn = maybe_compile(lambda z: torch.sigmoid(self.top(z)), compile_)
        params = list(self.bottom.parameters()) + list(self.top.parameters())
        self.opt = torch.optim.Adagrad(params, lr=0.01) if train else None
        self.description = (
            f"DLRM, batch {B}, the 26 MLPerf DLRMv2 tables capped at {a.cap} rows (D = {D}, "
            f"multi-hot: {self.sparse.lookups} lookups, ids floor(u^{a.skew:g} * rows)), bottom "
            f"MLP 13-512-256-{D}, dot interaction (problem 10's Model), top MLP "
            f"1024-1024-512-256-1, "
            + ("BCE loss, row-wise Adagrad on the tables (problem 5's Model), Adagrad on the "
               "MLPs" if train else "inference (sigmoid scores)"))

    def step(self):
        if not self.train:
            with torch.no_grad():
                x = self.bottom_fn(self.dense)
                emb = self.sparse.forward()
                with self.r("dot_interaction"):
                    z = self.interact(x, emb.transpose(0, 1))
                return self.top_fn(z)
        x = self.bottom_fn(self.dense)
        emb = self.sparse.forward().requires_grad_(True)
        with self.r("dot_interaction"):
            z = self.interact(x, emb.transpose(0, 1))
        loss = self.loss_fn(z, self.labels)
        loss.backward()
        self.sparse.update(emb.grad)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss


class CrossNet(nn.Module):
    """DCN-v2's low-rank cross layers: x_{l+1} = x0 * (U_l V_l x_l + b_l) + x_l."""

    def __init__(self, dim, layers, rank):
        super().__init__()
        self.V = nn.ModuleList(nn.Linear(dim, rank, bias=False) for _ in range(layers))
        self.U = nn.ModuleList(nn.Linear(rank, dim) for _ in range(layers))

    def forward(self, x0):
        x = x0
        for V, U in zip(self.V, self.U):
            x = x0 * U(V(x)) + x
        return x


class DCNv2:
    """DCN-v2 as MLPerf DLRMv2 runs it: the DLRMv2 tables, 3 low-rank (512) cross layers."""

    def __init__(self, a, regions, train, compile_):
        B, D, T = a.batch, 128, len(DLRMV2_ROWS)
        self.r, self.train = regions, train
        self.sparse = SparseArch(regions, _capped(DLRMV2_ROWS, a.cap), DLRMV2_HOT, D, B, a.skew,
                                 train)
        self.bottom = mlp([13, 512, 256, D], last_relu=True)
        self.cross = CrossNet(D * (T + 1), 3, 512).to(DEV)
        self.top = mlp([D * (T + 1), 1024, 1024, 512, 256, 1], last_relu=False)
        self.dense = torch.randn(B, 13, device=DEV)
        self.labels = torch.randint(0, 2, (B, 1), device=DEV).float()

        def logits(dense, emb):
            x = self.bottom(dense)
            x0 = torch.cat([x, emb.transpose(0, 1).reshape(x.shape[0], -1)], dim=1)
            return self.top(self.cross(x0))

        self.loss_fn = maybe_compile(
            lambda d, e, y: F.binary_cross_entropy_with_logits(logits(d, e), y), compile_)
        self.score_fn = maybe_compile(lambda d, e: torch.sigmoid(logits(d, e)), compile_)
        params = [p for m in (self.bottom, self.cross, self.top) for p in m.parameters()]
        self.opt = torch.optim.Adagrad(params, lr=0.01) if train else None
        self.description = (
            f"DCN-v2, batch {B}, the 26 MLPerf DLRMv2 tables capped at {a.cap} rows (D = {D}, "
            f"{self.sparse.lookups} lookups), bottom MLP 13-512-256-{D}, 3 low-rank (512) cross "
            f"layers on the {D * (T + 1)}-wide concatenation, top MLP 1024-1024-512-256-1, "
            + ("BCE loss, row-wise Adagrad on the tables (problem 5's Model), Adagrad on the "
               "dense part" if train else "inference"))

    def step(self):
        if not self.train:
            with torch.no_grad():
                return self.score_fn(self.dense, self.sparse.forward())
        emb = self.sparse.forward().requires_grad_(True)
        loss = self.loss_fn(self.dense, emb, self.labels)
        loss.backward()
        self.sparse.update(emb.grad)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss


class DeepFM:
    """DeepFM on the Criteo Kaggle tables (one-hot fields, K = 16): first-order embeddings
    (D = 1), the FM second-order term (problem 12's Model) and a deep MLP."""

    def __init__(self, a, regions, train, compile_):
        B, K = a.batch, 16
        self.r, self.train = regions, train
        rows = _capped(KAGGLE_ROWS, a.cap)
        self.fm_tables = SparseArch(regions, rows, [1] * len(rows), K, B, a.skew, train)
        self.linear_tables = SparseArch(regions, rows, None, 1, B, a.skew, train,
                                        ids=self.fm_tables.ids)
        self.fm = problem_model(12)
        self.dense_linear = nn.Linear(13, 1).to(DEV)
        self.deep = mlp([13 + len(rows) * K, 400, 400, 400, 1], last_relu=False)
        self.dense = torch.randn(B, 13, device=DEV)
        self.labels = torch.randint(0, 2, (B,), device=DEV).float()

        def rest(dense, e, lin):  # first order + deep part, [B]
            x = torch.cat([dense, e.transpose(0, 1).reshape(dense.shape[0], -1)], dim=1)
            first = lin.sum(0).squeeze(-1) + self.dense_linear(dense).squeeze(-1)
            return first + self.deep(x).squeeze(-1)

        self.rest_fn = maybe_compile(rest, compile_)
        params = list(self.dense_linear.parameters()) + list(self.deep.parameters())
        self.opt = torch.optim.Adam(params, lr=1e-3) if train else None
        self.description = (
            f"DeepFM, batch {B}, the 26 Criteo Kaggle tables capped at {a.cap} rows, one-hot "
            f"fields, K = {K} (FM) and D = 1 (first order) tables, FM term (problem 12's Model), "
            f"deep MLP 400-400-400-1 on the 13 dense + 26x{K} features, "
            + ("BCE loss, row-wise Adagrad on the tables (problem 5's Model), Adam on the dense "
               "part" if train else "inference"))

    def step(self):
        if not self.train:
            with torch.no_grad():
                e, lin = self.fm_tables.forward(), self.linear_tables.forward()
                with self.r("fm_interaction"):
                    fm = self.fm(e.transpose(0, 1))
                return torch.sigmoid(self.rest_fn(self.dense, e, lin) + fm)
        e = self.fm_tables.forward().requires_grad_(True)
        lin = self.linear_tables.forward().requires_grad_(True)
        with self.r("fm_interaction"):
            fm = self.fm(e.transpose(0, 1))
        logit = self.rest_fn(self.dense, e, lin) + fm
        loss = F.binary_cross_entropy_with_logits(logit, self.labels)
        loss.backward()
        self.fm_tables.update(e.grad)
        self.linear_tables.update(lin.grad)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss


class Block(nn.Module):
    """Pre-LN transformer block, causal SDPA."""

    def __init__(self, d, heads, ff, dropout=0.0):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.dropout = dropout

    def forward(self, x):
        B, L, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (t.view(B, L, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, L, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class SASRec:
    """SASRec-style sequential recommender: jagged item histories gathered to a padded bf16
    [B, L, D] batch (problem 6's Model), learned positions, causal transformer blocks, BCE on
    the next item against one sampled negative per position (training) or scores against every
    item and top-100 (inference); bf16 autocast."""

    def __init__(self, a, regions, train, compile_):
        B, L, D, E = a.seq_batch, 256, 256, a.items
        self.r, self.train, self.L = regions, train, L
        self.items = nn.Parameter(table(E, D, torch.bfloat16), requires_grad=train)
        self.pos = nn.Parameter(torch.randn(L, D, device=DEV) * 0.02)
        self.blocks = nn.Sequential(*[Block(D, 4, 4 * D, 0.1) for _ in range(2)]).to(DEV)
        self.ln = nn.LayerNorm(D).to(DEV)
        self.blocks.train(train)
        sigma = 1.0
        mu = math.log(L / 4) - sigma * sigma / 2  # log-normal lengths with mean L / 4
        self.lengths = torch.exp(torch.randn(B, device=DEV) * sigma + mu).long().clamp_(1, 4 * L)
        n = int(self.lengths.sum())
        self.history = skewed(E, n, a.skew)
        self.gather = problem_model(6)
        self.pos_ids = skewed(E, B * L, a.skew).view(B, L)
        self.neg_ids = torch.randint(0, E, (B, L), device=DEV)
        self.mask = (torch.arange(L, device=DEV) < self.lengths.clamp(max=L).unsqueeze(1)).float()
        self.last = self.lengths.clamp(max=L) - 1

        def encode(seq):
            return self.ln(self.blocks(seq + self.pos))

        def loss(seq, pos_e, neg_e, mask):
            h = encode(seq)
            lp, ln_ = (h * pos_e).sum(-1).float(), (h * neg_e).sum(-1).float()
            bce = (F.binary_cross_entropy_with_logits(lp, torch.ones_like(lp), reduction="none")
                   + F.binary_cross_entropy_with_logits(ln_, torch.zeros_like(ln_),
                                                        reduction="none"))
            return (bce * mask).sum() / mask.sum()

        self.encode_fn = maybe_compile(encode, compile_)
        self.loss_fn = maybe_compile(loss, compile_)
        params = [self.items, self.pos] + list(self.blocks.parameters()) + \
            list(self.ln.parameters())
        self.opt = torch.optim.Adam(params, lr=1e-3) if train else None
        self.description = (
            f"SASRec-style, batch {B}, {E} items (bf16 table, D = {D}), jagged histories "
            f"(log-normal lengths, mean L/4, {n} ids) gathered to a padded [B, {L}, {D}] batch "
            f"(problem 6's Model), 2 pre-LN causal blocks (4 heads, FF {4 * D}, SDPA), bf16 "
            "autocast, "
            + ("BCE on next item vs one sampled negative, Adam (dense, the item table included)"
               if train else "inference: scores of the last position against every item, "
               "top-100"))

    def step(self):
        if not self.train:
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                with self.r("sequence_gather_padded_bf16"):
                    seq = self.gather(self.items, self.history, self.lengths, self.L)
                h = self.encode_fn(seq)
                u = h[torch.arange(h.shape[0], device=DEV), self.last].to(torch.bfloat16)
                return torch.topk(u @ self.items.t(), 100, dim=1)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            with self.r("sequence_gather_padded_bf16"):
                seq = self.gather(self.items, self.history, self.lengths, self.L)
            pos_e = F.embedding(self.pos_ids, self.items)
            neg_e = F.embedding(self.neg_ids, self.items)
            loss = self.loss_fn(seq, pos_e, neg_e, self.mask)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss


class TwoTower:
    """Two-tower retrieval: user and item towers over embedding bags (problem 1's Model), MLPs
    to 128, L2-normalised, in-batch softmax (temperature 0.05); tables by row-wise Adagrad."""

    # (rows, lookups per sample): user id, country, age, a 20-long item history, 5 interests;
    # item id, category, brand, 4 tags.
    USER = ([4000000, 200, 100, 1000000, 10000], [1, 1, 1, 20, 5])
    ITEM = ([1000000, 10000, 100000, 50000], [1, 1, 1, 4])

    def __init__(self, a, regions, train, compile_):
        B, D = a.batch, 64
        self.r, self.train = regions, train
        (ur, uh), (ir, ih) = self.USER, self.ITEM
        self.user = SparseArch(regions, _capped(ur, a.cap), uh, D, B, a.skew, train)
        self.item = SparseArch(regions, _capped(ir, a.cap), ih, D, B, a.skew, train)
        self.user_mlp = mlp([len(ur) * D, 512, 256, 128], last_relu=False)
        self.item_mlp = mlp([len(ir) * D, 512, 256, 128], last_relu=False)

        def logits(ue, ie):
            u = F.normalize(self.user_mlp(ue.transpose(0, 1).reshape(ue.shape[1], -1)), dim=1)
            i = F.normalize(self.item_mlp(ie.transpose(0, 1).reshape(ie.shape[1], -1)), dim=1)
            return u @ i.t() / 0.05

        self.labels = torch.arange(B, device=DEV)
        self.loss_fn = maybe_compile(lambda u, i, y: F.cross_entropy(logits(u, i), y), compile_)
        self.score_fn = maybe_compile(logits, compile_)
        params = list(self.user_mlp.parameters()) + list(self.item_mlp.parameters())
        self.opt = torch.optim.Adam(params, lr=1e-3) if train else None
        self.description = (
            f"Two-tower retrieval, batch {B}, D = {D}: user tower over {len(ur)} tables "
            f"(id {min(ur[0], a.cap)} rows, a 20-long history bag, a 5-hot interest bag), item "
            f"tower over {len(ir)} tables, MLPs 512-256-128, L2-normalised, in-batch softmax "
            f"({B} x {B} logits), "
            + ("cross-entropy, row-wise Adagrad on the tables (problem 5's Model), Adam on the "
               "towers" if train else "inference (in-batch scores)"))

    def step(self):
        if not self.train:
            with torch.no_grad():
                return self.score_fn(self.user.forward(), self.item.forward())
        ue = self.user.forward().requires_grad_(True)
        ie = self.item.forward().requires_grad_(True)
        loss = self.loss_fn(ue, ie, self.labels)
        loss.backward()
        self.user.update(ue.grad)
        self.item.update(ie.grad)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss


class GPT(nn.Module):
    def __init__(self, vocab, seq, d, layers, heads):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.Sequential(*[Block(d, heads, 4 * d) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        return self.head(self.ln(self.blocks(h)))


class GPTTrain:
    """A GPT-2-small-sized training step for contrast: no recommender operation in it."""

    def __init__(self, a, regions, train, compile_):
        V, L, d, n, h, B = 50304, 1024, 768, 12, 12, 8
        if not train:
            raise ValueError("the GPT workload is a training step only")
        self.model = GPT(V, L, d, n, h).to(DEV)
        self.x = torch.randint(0, V, (B, L), device=DEV)
        self.y = torch.randint(0, V, (B, L), device=DEV)
        model = self.model

        def loss(x, y):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x)
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))

        self.loss_fn = maybe_compile(loss, compile_)
        self.opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
        self.description = (
            f"GPT-style transformer training step: {n} layers, d = {d}, {h} heads, sequence {L}, "
            f"batch {B}, vocabulary {V}, bf16 autocast, causal SDPA, cross-entropy, AdamW")

    def step(self):
        loss = self.loss_fn(self.x, self.y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss


WORKLOADS = {
    "dlrm-dlrmv2": DLRM,
    "dcnv2-dlrmv2": DCNv2,
    "deepfm-criteo": DeepFM,
    "sasrec-seq256": SASRec,
    "twotower-retrieval": TwoTower,
    "gpt-768x12": GPTTrain,
}


def build(name, args, regions, train, compile_):
    return WORKLOADS[name](args, regions, train, compile_)
