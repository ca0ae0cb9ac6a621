"""VeilProbe's learned parts: the text-to-suffix mapping model, Welch feature selection
and the prototypical network with an information-bottleneck term.

Everything is small and seeded so that it trains in seconds on one CPU core and gives
the same numbers on every run (torch's global RNG state is left untouched).

* Mapping model: a byte-level transformer encoder-decoder (``torch.nn`` layers, tiny
  dimensions) trained with teacher forcing to map a text to a suffix the target sampled
  for it. Its *mapping feature* for a (text, suffix) pair is the concatenation, over all
  encoder and decoder layers, of the layer outputs mean-pooled over the non-padding
  positions (the paper's "Full" variant, Table 6), the decoder being fed the sampled
  suffix. The authors' code feeds the decoder only a start token; we feed the suffix, so
  that a text's features depend on what the target generated for it even when the
  mapping model was trained on other texts.
* Welch selection: per-dimension two-sided Welch t-test (``scipy.stats.ttest_ind``,
  ``equal_var=False``) between labelled members and non-members; dimensions with
  p >= threshold are set to zero (paper §4.2).
* Prototypical network (Snell et al. 2017) with a variational information bottleneck:
  the embedding is a Gaussian q(z|Z) = N(mu(Z), diag sigma²(Z)); the loss is the
  episode's prototype cross-entropy (bounds -I(Z~;Y)) plus ``ib_beta`` times
  KL(q(z|Z) || N(0, I)) (bounds I(Z;Z~)), i.e. the paper's min I(Z,Z~) - beta I(Z~;Y)
  with beta = 1/ib_beta. The authors' code instead adds beta * sum(log(1 + Var(z)))
  over a batch; we use the standard variational bound of the paper's objective.
  Distances are squared Euclidean, as in the paper (the code's evaluation uses the
  plain Euclidean norm). The member probability softmax(-d)[member] equals
  sigmoid(d0 - d1), a monotone function of the paper's score delta = d0 - d1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

PAD, BOS, EOS = 256, 257, 258
VOCAB = 259


def encode_bytes(text: str, max_len: int, keep: str = "head") -> list[int]:
    data = list(text.encode("utf-8"))
    if len(data) > max_len:
        data = data[-max_len:] if keep == "tail" else data[:max_len]
    return data


def _pad(rows: Sequence[Sequence[int]], length: int | None = None) -> np.ndarray:
    length = length or max(1, max((len(r) for r in rows), default=1))
    out = np.full((len(rows), length), PAD, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def _torch():
    import torch

    return torch


class one_thread:
    """Run torch on one thread (the tiny models gain nothing from more, and shared
    machines lose a lot to oversubscription); restores the previous setting."""

    def __enter__(self):
        torch = _torch()
        self.before = torch.get_num_threads()
        torch.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        _torch().set_num_threads(self.before)
        return False


def _build_mapping_model(d_model: int, nhead: int, layers: int, ff: int, max_len: int):
    torch = _torch()
    nn = torch.nn

    class MappingModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, d_model, padding_idx=PAD)
            self.pos = nn.Embedding(max_len, d_model)
            self.enc = nn.ModuleList(
                nn.TransformerEncoderLayer(d_model, nhead, ff, dropout=0.0, batch_first=True)
                for _ in range(layers)
            )
            self.dec = nn.ModuleList(
                nn.TransformerDecoderLayer(d_model, nhead, ff, dropout=0.0, batch_first=True)
                for _ in range(layers)
            )
            self.out = nn.Linear(d_model, VOCAB)

        def _embed(self, ids):
            positions = torch.arange(ids.shape[1]).unsqueeze(0)
            return self.embed(ids) + self.pos(positions)

        def forward(self, src, tgt):
            """Per-layer encoder and decoder outputs and the output logits."""
            src_pad = src == PAD
            tgt_pad = tgt == PAD
            causal = torch.triu(torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool), diagonal=1)
            h = self._embed(src)
            enc_states = []
            for layer in self.enc:
                h = layer(h, src_key_padding_mask=src_pad)
                enc_states.append(h)
            g = self._embed(tgt)
            dec_states = []
            for layer in self.dec:
                g = layer(
                    g,
                    h,
                    tgt_mask=causal,
                    tgt_key_padding_mask=tgt_pad,
                    memory_key_padding_mask=src_pad,
                )
                dec_states.append(g)
            return enc_states, dec_states, self.out(g)

    return MappingModel()


@dataclass
class MappingConfig:
    d_model: int = 32
    nhead: int = 2
    layers: int = 2
    ff: int = 64
    max_input: int = 256  # bytes of the text (its end, nearest the suffix)
    max_suffix: int = 128  # bytes of the suffix (its beginning)
    epochs: int = 3
    batch_size: int = 16
    lr: float = 3e-3
    seed: int = 0


class MappingModel:
    """Train on (text, suffix) pairs; ``features`` gives pooled hidden states."""

    def __init__(self, config: MappingConfig):
        self.config = config
        self.model = None
        self.losses: list[float] = []

    def _batch(self, texts: Sequence[str], suffixes: Sequence[str]):
        torch = _torch()
        c = self.config
        src = _pad([encode_bytes(t, c.max_input, keep="tail") or [PAD] for t in texts])
        sfx = [encode_bytes(s, c.max_suffix, keep="head") for s in suffixes]
        tgt_in = _pad([[BOS] + s for s in sfx])
        tgt_out = _pad([s + [EOS] for s in sfx], length=tgt_in.shape[1])
        return torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt_out)

    def fit(self, texts: Sequence[str], suffixes: Sequence[str]) -> "MappingModel":
        torch = _torch()
        c = self.config
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(c.seed)
            max_len = max(c.max_input, c.max_suffix + 1)
            self.model = _build_mapping_model(c.d_model, c.nhead, c.layers, c.ff, max_len)
            optimizer = torch.optim.Adam(self.model.parameters(), lr=c.lr)
            loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD)
            generator = torch.Generator().manual_seed(c.seed)
            n = len(texts)
            self.model.train()
            for _ in range(c.epochs):
                order = torch.randperm(n, generator=generator).tolist()
                total = 0.0
                for start in range(0, n, c.batch_size):
                    idx = order[start : start + c.batch_size]
                    src, tgt_in, tgt_out = self._batch([texts[i] for i in idx], [suffixes[i] for i in idx])
                    _, _, logits = self.model(src, tgt_in)
                    loss = loss_fn(logits.reshape(-1, VOCAB), tgt_out.reshape(-1))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    total += loss.item() * len(idx)
                self.losses.append(total / max(n, 1))
            self.model.eval()
        return self

    def features(self, texts: Sequence[str], suffixes: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """One row per pair: mean-pooled outputs of every encoder then decoder layer."""
        torch = _torch()
        if self.model is None:
            raise RuntimeError("mapping model is not trained")
        rows = []
        with torch.no_grad():
            for start in range(0, len(texts), batch_size):
                src, tgt_in, _ = self._batch(texts[start : start + batch_size], suffixes[start : start + batch_size])
                enc, dec, _ = self.model(src, tgt_in)
                src_keep = (src != PAD).unsqueeze(-1).float()
                tgt_keep = (tgt_in != PAD).unsqueeze(-1).float()
                pooled = [(h * src_keep).sum(1) / src_keep.sum(1).clamp(min=1) for h in enc]
                pooled += [(g * tgt_keep).sum(1) / tgt_keep.sum(1).clamp(min=1) for g in dec]
                rows.append(torch.cat(pooled, dim=-1).numpy())
        return np.concatenate(rows, axis=0).astype(np.float64)


def welch_select(features: np.ndarray, labels: Sequence[int], p_threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Boolean mask of dimensions whose member/non-member means differ by a two-sided
    Welch t-test with p < ``p_threshold``, and the p-values (NaN -> 1: constant dims)."""
    from scipy.stats import ttest_ind

    labels = np.asarray(labels)
    x = np.asarray(features, dtype=np.float64)
    members, others = x[labels == 1], x[labels == 0]
    if len(members) < 2 or len(others) < 2:
        raise ValueError("Welch selection needs at least 2 samples per class")
    import warnings

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant dimensions give NaN
        p = ttest_ind(members, others, axis=0, equal_var=False).pvalue
    p = np.where(np.isnan(p), 1.0, p)
    return p < p_threshold, p


@dataclass
class ProtoConfig:
    hidden: int = 64
    bottleneck: int = 16
    steps: int = 300
    lr: float = 1e-3
    weight_decay: float = 1e-5
    ib_beta: float = 1e-3
    shots: int = 5  # support samples per class and episode (at most half the class)
    queries: int = 5  # query samples per class and episode
    seed: int = 0


class ProtoNet:
    """Prototypical network over fixed feature vectors, two classes (0, 1)."""

    def __init__(self, config: ProtoConfig):
        self.config = config
        self.net = None
        self.prototypes = None  # (2, bottleneck): non-member, member
        self.losses: list[float] = []

    def _build(self, dim: int):
        torch = _torch()
        nn = torch.nn
        c = self.config

        class Embed(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(dim, c.hidden), nn.ReLU(), nn.Linear(c.hidden, c.hidden), nn.ReLU())
                self.mu = nn.Linear(c.hidden, c.bottleneck)
                self.logvar = nn.Linear(c.hidden, c.bottleneck)

            def forward(self, x):
                h = self.body(x)
                return self.mu(h), self.logvar(h).clamp(-8.0, 8.0)

        return Embed()

    def fit(self, x: np.ndarray, y: Sequence[int]) -> "ProtoNet":
        torch = _torch()
        c = self.config
        y = np.asarray(y)
        classes = [np.flatnonzero(y == k) for k in (0, 1)]
        if min(len(idx) for idx in classes) < 2:
            raise ValueError("prototypical network needs at least 2 samples per class")
        xt = torch.as_tensor(np.asarray(x), dtype=torch.float32)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(c.seed)
            self.net = self._build(xt.shape[1])
            optimizer = torch.optim.Adam(self.net.parameters(), lr=c.lr, weight_decay=c.weight_decay)
            rng = np.random.default_rng(c.seed)
            gen = torch.Generator().manual_seed(c.seed)
            self.net.train()
            for _ in range(c.steps):
                support, query, query_y = [], [], []
                for k, idx in enumerate(classes):
                    n_shot = max(1, min(c.shots, len(idx) // 2))
                    n_query = max(1, min(c.queries, len(idx) - n_shot))
                    pick = rng.permutation(idx)[: n_shot + n_query]
                    support.append(pick[:n_shot])
                    query.append(pick[n_shot:])
                    query_y += [k] * len(pick[n_shot:])
                mu, logvar = self.net(xt)
                z = mu + torch.randn(mu.shape, generator=gen) * torch.exp(0.5 * logvar)
                protos = torch.stack([z[torch.as_tensor(s)].mean(0) for s in support])
                q = z[torch.as_tensor(np.concatenate(query))]
                dist = ((q.unsqueeze(1) - protos.unsqueeze(0)) ** 2).sum(-1)
                ce = torch.nn.functional.cross_entropy(-dist, torch.as_tensor(query_y))
                used = torch.as_tensor(np.concatenate(support + query))
                kl = 0.5 * (mu[used] ** 2 + logvar[used].exp() - 1.0 - logvar[used]).sum(-1).mean()
                loss = ce + c.ib_beta * kl
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                self.losses.append(loss.item())
            self.net.eval()
            with torch.no_grad():
                mu, _ = self.net(xt)
                self.prototypes = torch.stack([mu[torch.as_tensor(idx)].mean(0) for idx in classes])
        return self

    def distances(self, x: np.ndarray) -> np.ndarray:
        """Squared Euclidean distances (n, 2) of the embeddings (means) to the prototypes."""
        torch = _torch()
        if self.net is None:
            raise RuntimeError("prototypical network is not trained")
        with torch.no_grad():
            mu, _ = self.net(torch.as_tensor(np.asarray(x), dtype=torch.float32))
            d = ((mu.unsqueeze(1) - self.prototypes.unsqueeze(0)) ** 2).sum(-1)
        return d.numpy().astype(np.float64)

    def member_probability(self, x: np.ndarray) -> np.ndarray:
        return prototype_probability(self.distances(x))


def prototype_probability(distances: np.ndarray) -> np.ndarray:
    """softmax(-d) of the member column for rows of (d_nonmember, d_member)."""
    d = np.asarray(distances, dtype=np.float64)
    # sigmoid(d0 - d1), computed stably
    delta = d[:, 0] - d[:, 1]
    out = np.empty_like(delta)
    pos = delta >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-delta[pos]))
    e = np.exp(delta[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def standardize_fit(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std = np.where(std < 1e-8, 1.0, std)
    return mean, std


__all__ = [
    "MappingConfig",
    "MappingModel",
    "ProtoConfig",
    "ProtoNet",
    "prototype_probability",
    "standardize_fit",
    "welch_select",
    "encode_bytes",
    "one_thread",
]
