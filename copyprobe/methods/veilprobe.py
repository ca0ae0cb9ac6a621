"""VeilProbe (Hu et al. 2025; ``../shared/papers/002``): black-box detection from
text-to-suffix pairs, trained on a few labelled samples.

Per text (``run``; the result is a :class:`VeilFeatures`, not a score):

1. **Text-to-suffix sampling**: ``n_samples`` completions of the text from the target,
   with no instruction (plain prompt, distinct seeds so that they differ and are cached).
2. **Key-token perturbation**: every word's importance is measured with one or more
   small proxy models by perturbation-based attribution: remove the word and see how
   much the proxy's predictions of the suffix it generates change (the paper: key tokens
   "exert substantial influence on the generation of the suffix text"; GILOT measures
   the change of the output distributions of the generated sequence). The suffix is the
   proxy's own greedy continuation of the text, ``attribution_tokens`` long. Backends
   return the log-prob of each actual token, not whole distributions, so
   ``importance = mean |log p(suffix token | text) - log p(suffix token | text without
   the word)|``; GILOT's optimal transport between full distributions is what this
   per-token form stands in for. ``attribution_scope=tail`` measures the change on every
   token after the word instead (the rest of the text too: what this module did before;
   also the fallback when the proxy's continuation is empty). Either way the proxy
   scores the text without the word plus the continuation; with the suffix scope each
   such text is sent as the text before its block of ``ATTRIBUTION_BLOCK`` words (a
   context the block's texts share) plus the rest, the tail scope sends whole texts (the
   requests of runs made before the blocks). Importances are averaged over the proxies, the top
   ``gamma`` fraction of words (at least one) is replaced by a substitute that a model
   proposes (few-shot synonym prompt, greedy; if it proposes the same word or nothing
   usable, a fixed list gives a deterministic different word), and the perturbed text
   is sampled like the original.

Training (``fit``, on the runner's seeded labelled subset of ``n_train`` rows):

3. a small byte-level transformer encoder-decoder learns text -> sampled suffix (on the
   training rows' original and perturbed pairs); its mean-pooled hidden states,
   averaged over a text's samples, are the mapping feature Z^s (Z^r for the perturbed
   text); the perturbation feature Z^c = Z^s - Z^r keeps only dimensions where
   members and non-members differ by a Welch t-test with p < ``p_threshold``; the
   membership feature is Z = Z^s (+) Z^c~ (each part standardised on the training rows);
4. a prototypical network with an information-bottleneck term is trained on Z of the
   training rows; ``predict`` gives the probability of the member prototype,
   softmax(-squared distance), which orders texts like the paper's d(Z,c0) - d(Z,c1).

Differences from the authors' public code (we follow the paper): the code perturbs a
fixed 13 tokens (the paper: top gamma = 10 %), uses |Z^r - Z^s| (the paper: the
difference), Euclidean instead of squared Euclidean distance at test time, proposes
substitutes with BERT fill-mask, and trains the mapping model on all texts, labelled or
not (transductive). Here the mapping model sees only the training rows, because the
runner calls ``fit`` before it shows ``predict`` the other rows; to keep a text's own
suffixes in its features the decoder is fed the sampled suffix (see ``_veil_models``).
Paper defaults scaled down for CPU: suffixes of 64 tokens (paper 512), a 2-layer,
32-dimensional mapping model (paper: 6 layers, 512 dimensions, BERT tokenizer).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from copyprobe.backends.base import GenerateRequest, TokenLogprobs, TokenLogprobsRequest
from copyprobe.data.example import Example
from copyprobe.errors import ConfigError, DataError, RowError
from copyprobe.methods.base import BLACK_BOX, Method, MethodRun, Score
from copyprobe.text import Word, normalize, response_spans, split_specs, split_words
from copyprobe.params import COUNT, FRACTION, Integer, ModelSpec, NON_NEGATIVE_INT, OneOf, PER_TEXT, POSITIVE, Real, SEED, param
from copyprobe.registry import register

SUBSTITUTE_PROMPT = "Synonyms:\nhappy -> glad\nbig -> large\nquickly -> rapidly\nhouse -> home\n{word} ->"
FALLBACK_WORDS = ("thing", "place", "time", "matter", "person", "moment", "way", "part")
# The texts without one of ATTRIBUTION_BLOCK consecutive words all begin with the text
# before the first of them: sent as that context plus the rest, a backend computes it once
# per block (transformers batches the block's texts on one KV cache; without a context it
# runs every text from its start), 1.6x fewer tokens on the demo passages. The cut is at
# the whitespace before a word, where byte-level BPE tokenizers cut too.
ATTRIBUTION_BLOCK = 8
MIN_PER_CLASS = 2  # Welch's test and an episode (1 support + 1 query) need two per class


@dataclass(frozen=True)
class VeilFeatures:
    """What ``run`` returns for one text: its samples and its perturbed copy's samples."""

    text: str
    suffixes: tuple[str, ...]
    perturbed_text: str
    perturbed_suffixes: tuple[str, ...]
    key_words: tuple[str, ...] = ()
    substitutes: tuple[str, ...] = ()
    importance: tuple[float, ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "VeilFeatures":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


# -- text helpers -------------------------------------------------------------------------


def remove_word(text: str, word: Word) -> tuple[str, int, int]:
    """The text without the word (and the whitespace after it, or before it for the last
    word); returns (new text, tail start in the new text, tail start in the original)."""
    end = word.end
    while end < len(text) and text[end].isspace():
        end += 1
    start = word.start
    if end == len(text):  # last word: drop the whitespace before it instead
        while start > 0 and text[start - 1].isspace():
            start -= 1
    return text[:start] + text[end:], start, end


def scored_starts(full: str, response: TokenLogprobs) -> list[tuple[int, float]]:
    """(start character, log-prob) of each scored token that could be located."""
    spans = response_spans(full, response)
    first = len(response.token_ids) - len(response.logprobs)  # 1 for a plain text, 0 after a context
    return [
        (span[0], float(response.logprobs[t - first]))
        for t, span in enumerate(spans)
        if t >= first and span is not None
    ]


def tail_logprobs(full: str, response: TokenLogprobs | list[tuple[int, float]], tail_start: int) -> list[float]:
    """Log-probs of the scored tokens that start at or after ``tail_start``."""
    starts = scored_starts(full, response) if isinstance(response, TokenLogprobs) else response
    return [lp for start, lp in starts if start >= tail_start]


def block_start(text: str, words: Sequence[Word], i: int) -> int:
    """Where the block of ``ATTRIBUTION_BLOCK`` words holding ``words[i]`` begins: the
    whitespace before its first word (0 for the first block)."""
    first = i // ATTRIBUTION_BLOCK * ATTRIBUTION_BLOCK
    if first == 0:
        return 0
    cut = words[first].start
    while cut > 0 and text[cut - 1].isspace():
        cut -= 1
    return cut


def attribution(original_tail: Sequence[float], removed_tail: Sequence[float]) -> float:
    """Mean absolute change of the tail tokens' log-probs, aligned from the end."""
    m = min(len(original_tail), len(removed_tail))
    if m == 0:
        return 0.0
    a = np.asarray(original_tail[len(original_tail) - m :])
    b = np.asarray(removed_tail[len(removed_tail) - m :])
    return float(np.abs(a - b).mean())


def top_words(words: Sequence[Word], importance: Sequence[float], gamma: float) -> list[int]:
    """Indices (into ``words``) of the top ``gamma`` fraction by importance, at least one;
    ties go to the earlier word."""
    k = max(1, int(gamma * len(words) + 0.5))
    order = sorted(range(len(words)), key=lambda i: (-importance[i], i))
    return sorted(order[:k])


def choose_substitute(word: str, proposal: str) -> str:
    """The first word of the proposal, in the original's case; never the word itself."""
    import re

    found = re.findall(r"[^\W_][\w'’\-]*", proposal)
    candidate = found[0] if found else ""
    if not candidate or normalize(candidate) == normalize(word):
        start = int(hashlib.sha256(word.encode()).hexdigest(), 16) % len(FALLBACK_WORDS)
        for j in range(len(FALLBACK_WORDS)):
            candidate = FALLBACK_WORDS[(start + j) % len(FALLBACK_WORDS)]
            if normalize(candidate) != normalize(word):
                break
    if word.isupper() and len(word) > 1:
        return candidate.upper()
    if word[:1].isupper():
        return candidate[:1].upper() + candidate[1:]
    return candidate


def replace_words(text: str, words: Sequence[Word], substitutes: Sequence[str]) -> str:
    for word, sub in sorted(zip(words, substitutes), key=lambda p: -p[0].core_start):
        text = text[: word.core_start] + sub + text[word.core_end :]
    return text


# -- the method ---------------------------------------------------------------------------


@register
class VeilProbe(Method):
    name = "veilprobe"
    access = BLACK_BOX
    trains = True
    summary = (
        "VeilProbe: text-to-suffix mapping features + prototypical network; TRAINS on "
        "n_train labelled samples (Hu et al. 2025)"
    )

    reference: str = param(
        "auto", ModelSpec(auto=True),
        "default proxy/substitute model; 'auto' = the other bundled model",
    )
    proxies: str = param(
        "reference", ModelSpec(auto=True, keywords=("reference",), many=True),
        "comma list of proxy models for key-token attribution; 'reference' = the reference model",
    )
    substituter: str = param(
        "reference", ModelSpec(auto=True, keywords=("reference",)),
        "model proposing substitute words; 'reference' = the reference model",
    )
    gamma: float = param(
        0.1, FRACTION,
        "fraction of words (most important first) replaced in the perturbed text (paper: 0.1)",
    )
    n_samples: int = param(3, PER_TEXT, "suffixes sampled from the target per text and per perturbed text (paper: 3)")
    suffix_tokens: int = param(64, COUNT, "maximum tokens per sampled suffix (paper: 512)")
    temperature: float = param(1.0, POSITIVE, "sampling temperature for the suffixes")
    seed: int = param(0, SEED, "seed of sampling (sample j uses seed + j), training and model initialisation")
    attribution_tokens: int = param(16, COUNT, "length of the proxy's greedy continuation used in attribution")
    key_tokens: str = param(
        "attribution", OneOf("attribution", "random"),
        "attribution (proxy leave-one-word-out) or random (seeded; the paper's ablation, no proxy calls)",
    )
    attribution_scope: str = param(
        "suffix", OneOf("suffix", "tail"),
        "log-probs whose change measures a word's importance: suffix (the proxy's continuation, "
        "as the paper) or tail (every token after the word)",
    )
    max_attribution_words: int = param(
        0, NON_NEGATIVE_INT,
        "attribute only the last N words (nearest the suffix; 0 = all) to bound cost",
    )
    n_train: int = param(50, Integer(2 * MIN_PER_CLASS), "labelled samples the runner gives fit() (paper: about 50)")
    p_threshold: float = param(
        0.05, FRACTION,
        "Welch t-test p-value below which a perturbation-feature dimension is kept",
    )
    map_dim: int = param(32, COUNT, "width of the mapping model")
    map_layers: int = param(2, COUNT, "encoder and decoder layers of the mapping model")
    map_epochs: int = param(3, COUNT, "training epochs of the mapping model")
    max_input_bytes: int = param(256, COUNT, "bytes of the text (its end) the mapping model reads")
    max_suffix_bytes: int = param(128, COUNT, "bytes of each suffix (its start) the mapping model learns")
    proto_steps: int = param(300, COUNT, "training episodes of the prototypical network")
    bottleneck: int = param(16, COUNT, "dimension of the prototypical embedding")
    ib_beta: float = param(1e-3, Real(0), "weight of the information-bottleneck (KL) term")

    # -- configuration ---------------------------------------------------------------
    def validate(self) -> None:
        super().validate()
        if self.map_dim % 2:
            raise ConfigError(f"veilprobe.map_dim must be even (two attention heads), got {self.map_dim}")
        if not self.proxy_specs():
            raise ConfigError("veilprobe.proxies must name at least one model")

    def train_size(self) -> int:
        return self.n_train

    def _resolve(self, spec: str) -> str:
        return self.reference if spec in ("reference", "auto") else spec

    def proxy_specs(self) -> list[str]:
        return [self._resolve(s) for s in split_specs(self.proxies)]

    def substituter_spec(self) -> str:
        return self._resolve(str(self.substituter).strip() or "reference")

    def models(self) -> set[str]:
        proxies = set(self.proxy_specs()) if self.key_tokens == "attribution" else set()
        return proxies | {self.substituter_spec()}

    # -- requests ---------------------------------------------------------------------------
    def sample_requests(self, text: str) -> list[GenerateRequest]:
        return [
            GenerateRequest(
                prompt=text,
                max_tokens=self.suffix_tokens,
                temperature=float(self.temperature),
                seed=self.seed + j,
            )
            for j in range(self.n_samples)
        ]

    def run(self, example: Example) -> MethodRun:
        text = example.text
        specs = self.proxy_specs() + [self.substituter_spec()]
        if "auto" in specs:
            raise ConfigError("veilprobe.reference 'auto' must be resolved against the target model first")
        proxies = self.proxy_specs()
        words = [w for w in split_words(text) if any(ch.isalnum() for ch in w.core)]
        if not words:
            raise RowError("veilprobe: the text has no words")

        # round 1: the target's suffixes and each proxy's greedy continuation
        if self.key_tokens == "random":
            proxies = []
        continuation_reqs = [
            GenerateRequest(prompt=text, max_tokens=self.attribution_tokens, temperature=0.0, model=p)
            for p in proxies
        ]
        sample_reqs = self.sample_requests(text)
        answers = yield continuation_reqs + sample_reqs
        continuations = [a.text for a in answers[: len(proxies)]]
        suffixes = tuple(a.text for a in answers[len(proxies) :])

        importance = np.zeros(len(words))
        if self.key_tokens == "random":
            seed = int(hashlib.sha256(f"{self.seed}:{text}".encode()).hexdigest()[:16], 16)
            importance = np.random.default_rng(seed).random(len(words))
        else:
            # round 2: leave-one-word-out log-probs under each proxy
            first = 0
            if self.max_attribution_words and len(words) > self.max_attribution_words:
                first = len(words) - self.max_attribution_words
            attributed = list(range(first, len(words)))
            removed = [remove_word(text, words[i]) for i in attributed]
            # each removed-word text as context (the text before its block) + the rest; the
            # tail scope keeps whole texts, the requests of the runs made before the blocks
            suffix_scope = self.attribution_scope == "suffix"
            cuts = [block_start(text, words, i) if suffix_scope else 0 for i in attributed]
            reqs = []
            for proxy, cont in zip(proxies, continuations):
                reqs.append(TokenLogprobsRequest(text + cont, stats=False, model=proxy))
                reqs += [TokenLogprobsRequest(r_text[cut:] + cont, context=r_text[:cut], stats=False, model=proxy)
                         for (r_text, _, _), cut in zip(removed, cuts)]
            responses = yield reqs
            per = len(removed) + 1
            for k, cont in enumerate(continuations):
                block = responses[k * per : (k + 1) * per]
                full = text + cont
                original = scored_starts(full, block[0])
                # the paper's scope: tokens that start in the continuation (an empty one:
                # nothing to measure there, so every token after the word)
                suffix = suffix_scope and bool(tail_logprobs(full, original, len(text)))
                for j, ((r_text, r_tail, o_tail), cut) in enumerate(zip(removed, cuts)):
                    original_tail = tail_logprobs(full, original, len(text) if suffix else o_tail)
                    scored = r_text[cut:] + cont  # the request's text (after its context)
                    removed_tail = tail_logprobs(scored, block[j + 1], (len(r_text) if suffix else r_tail) - cut)
                    importance[attributed[j]] += attribution(original_tail, removed_tail)
            importance /= len(proxies)

        # round 3: substitutes for the key words
        keys = top_words(words, importance, self.gamma)
        key_words = [words[i] for i in keys]
        proposals = yield [
            GenerateRequest(
                prompt=SUBSTITUTE_PROMPT.format(word=w.core),
                max_tokens=8,
                temperature=0.0,
                stop=("\n",),
                model=self.substituter_spec(),
            )
            for w in key_words
        ]
        substitutes = [choose_substitute(w.core, p.text) for w, p in zip(key_words, proposals)]
        perturbed = replace_words(text, key_words, substitutes)

        # round 4: the target's suffixes of the perturbed text
        answers = yield self.sample_requests(perturbed)
        return VeilFeatures(
            text=text,
            suffixes=suffixes,
            perturbed_text=perturbed,
            perturbed_suffixes=tuple(a.text for a in answers),
            key_words=tuple(w.core for w in key_words),
            substitutes=tuple(substitutes),
            importance=tuple(round(float(v), 6) for v in importance),
        )

    # -- learning -------------------------------------------------------------------------
    def _configs(self):
        from copyprobe.methods._veil_models import MappingConfig, ProtoConfig

        mapping = MappingConfig(
            d_model=self.map_dim,
            nhead=2,
            layers=self.map_layers,
            ff=2 * self.map_dim,
            max_input=self.max_input_bytes,
            max_suffix=self.max_suffix_bytes,
            epochs=self.map_epochs,
            seed=self.seed,
        )
        proto = ProtoConfig(bottleneck=self.bottleneck, steps=self.proto_steps, ib_beta=float(self.ib_beta), seed=self.seed)
        return mapping, proto

    @staticmethod
    def _as_features(features: Sequence[Any]) -> list[VeilFeatures]:
        out = []
        for f in features:
            if isinstance(f, dict):
                f = VeilFeatures.from_json(f)
            if not isinstance(f, VeilFeatures):
                raise TypeError(f"veilprobe expects VeilFeatures, got {type(f).__name__}")
            out.append(f)
        return out

    def _mapping_features(self, features: Sequence[VeilFeatures]) -> tuple[np.ndarray, np.ndarray]:
        """Z^s and Z^r: pooled mapping-model states averaged over each text's samples."""

        def pooled(pairs: list[tuple[str, tuple[str, ...]]]) -> np.ndarray:
            texts, sfx, owner = [], [], []
            for i, (t, suffixes) in enumerate(pairs):
                for s in suffixes or ("",):
                    texts.append(t)
                    sfx.append(s)
                    owner.append(i)
            rows = self.mapping_.features(texts, sfx)
            owner = np.asarray(owner)
            return np.stack([rows[owner == i].mean(axis=0) for i in range(len(pairs))])

        zs = pooled([(f.text, f.suffixes) for f in features])
        zr = pooled([(f.perturbed_text, f.perturbed_suffixes) for f in features])
        return zs, zr

    def _membership(self, zs: np.ndarray, zr: np.ndarray) -> np.ndarray:
        zc = zs - zr
        s = (zs - self.zs_mean_) / self.zs_std_
        c = ((zc - self.zc_mean_) / self.zc_std_) * self.keep_
        return np.concatenate([s, c], axis=1)

    def fit(self, features: Sequence[Any], labels: Sequence[int]) -> "VeilProbe":
        from copyprobe.methods._veil_models import (
            MappingModel,
            ProtoNet,
            one_thread,
            standardize_fit,
            welch_select,
        )

        features = self._as_features(features)
        labels = [int(v) for v in labels]
        if len(features) != len(labels):
            raise ValueError(f"veilprobe.fit: {len(features)} feature rows but {len(labels)} labels")
        if any(v not in (0, 1) for v in labels):
            raise DataError("veilprobe needs labels 0 (non-member) and 1 (member) to train")
        n_members, n_non = labels.count(1), labels.count(0)
        if n_members < MIN_PER_CLASS or n_non < MIN_PER_CLASS:
            raise DataError(
                f"veilprobe needs at least {MIN_PER_CLASS} labelled members and {MIN_PER_CLASS} "
                f"labelled non-members to train ({2 * MIN_PER_CLASS} samples at least; n_train="
                f"{self.n_train} requested), got {n_members} members and {n_non} non-members"
            )
        mapping_cfg, proto_cfg = self._configs()
        with one_thread():
            texts, sfx = [], []
            for f in features:
                for s in f.suffixes:
                    texts.append(f.text)
                    sfx.append(s)
                for s in f.perturbed_suffixes:
                    texts.append(f.perturbed_text)
                    sfx.append(s)
            if not texts:
                raise DataError("veilprobe: the training rows have no sampled suffixes")
            self.mapping_ = MappingModel(mapping_cfg).fit(texts, sfx)
            zs, zr = self._mapping_features(features)
            zc = zs - zr
            self.keep_, self.pvalues_ = welch_select(zc, labels, self.p_threshold)
            self.zs_mean_, self.zs_std_ = standardize_fit(zs)
            self.zc_mean_, self.zc_std_ = standardize_fit(zc)
            z = self._membership(zs, zr)
            self.proto_ = ProtoNet(proto_cfg).fit(z, labels)
        self.train_info_ = {
            "n_train": len(labels),
            "members": n_members,
            "non_members": n_non,
            "mapping_loss": [round(v, 4) for v in self.mapping_.losses],
            "kept_perturbation_dims": int(self.keep_.sum()),
            "perturbation_dims": int(self.keep_.size),
        }
        return self

    def predict(self, features: Sequence[Any]) -> list[Score]:
        from copyprobe.methods._veil_models import one_thread, prototype_probability

        if not hasattr(self, "proto_"):
            raise RuntimeError("veilprobe.predict called before fit")
        features = self._as_features(features)
        if not features:
            return []
        with one_thread():
            zs, zr = self._mapping_features(features)
            d = self.proto_.distances(self._membership(zs, zr))
        probs = prototype_probability(d)
        return [
            Score(
                value=float(p),
                details={
                    "d_member": round(float(row[1]), 6),
                    "d_nonmember": round(float(row[0]), 6),
                    "key_words": list(f.key_words),
                    "substitutes": list(f.substitutes),
                },
            )
            for p, row, f in zip(probs, d, features)
        ]
