"""The SQLite response cache: hits and misses, keys, uncacheable requests, damage."""

import sqlite3
import subprocess
import sys
import textwrap

import pytest

from copyprobe.backends.base import GenerateRequest, RequestFailed, TokenLogprobsRequest
from copyprobe.backends.cache import COMMITS_PER_CHUNK, CachedBackend, ResponseCache
from copyprobe.backends.fake import FakeBackend
from copyprobe.errors import ConfigError


def test_second_answer_comes_from_the_cache(tmp_path):
    fake = FakeBackend()
    cached = CachedBackend(fake, ResponseCache(tmp_path / "c.sqlite"))
    requests = [TokenLogprobsRequest(f"text number {i}") for i in range(5)]
    first = cached.answer(requests)
    assert (cached.hits, cached.misses) == (0, 5)
    again = CachedBackend(fake, ResponseCache(tmp_path / "c.sqlite"))
    second = again.answer(requests)
    assert (again.hits, again.misses) == (5, 0)
    assert second == first
    assert fake.calls["token_logprobs"] == 5


def test_entries_are_per_model_fingerprint(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    a = CachedBackend(FakeBackend(spec="a"), cache)
    b = CachedBackend(FakeBackend(spec="b"), cache)
    a.answer([TokenLogprobsRequest("same text")])
    b.answer([TokenLogprobsRequest("same text")])
    assert b.misses == 1 and cache.count() == 2


def test_request_fields_change_the_key():
    assert TokenLogprobsRequest("t").key() != TokenLogprobsRequest("t", ngram=2).key()
    assert GenerateRequest(prompt="p", seed=1).key() != GenerateRequest(prompt="p", seed=2).key()
    assert TokenLogprobsRequest("t").key() == TokenLogprobsRequest("t").key()


def test_generation_without_top_k_keeps_the_old_cache_key():
    # the key every cached generation was stored under before top_k existed
    import hashlib
    import json

    old_payload = {"kind": "generate", "prompt": "p", "messages": None, "max_tokens": 64, "temperature": 1.0,
                   "top_p": 1.0, "stop": [], "seed": 3, "repetition_penalty": 1.0, "top_logprobs": 0}
    old_key = hashlib.sha256(json.dumps(old_payload, sort_keys=True, ensure_ascii=False,
                                        separators=(",", ":")).encode()).hexdigest()
    assert GenerateRequest(prompt="p", temperature=1.0, seed=3).key() == old_key
    assert GenerateRequest(prompt="p", temperature=1.0, seed=3, top_k=50).key() != old_key


def test_unseeded_sampling_is_not_cached(tmp_path):
    fake = FakeBackend()
    cached = CachedBackend(fake, ResponseCache(tmp_path / "c.sqlite"))
    sampled = GenerateRequest(prompt="once upon", temperature=0.8)
    cached.answer([sampled])
    cached.answer([sampled])
    assert fake.calls["generate"] == 2
    seeded = GenerateRequest(prompt="once upon", temperature=0.8, seed=3)
    cached.answer([seeded])
    cached.answer([seeded])
    assert fake.calls["generate"] == 3


def test_failed_requests_are_not_cached(tmp_path):
    class Failing(FakeBackend):
        def _answer_generate(self, requests, progress=None):
            self.calls["generate"] += len(requests)
            return [RequestFailed("timeout") for _ in requests]
    failing = Failing()
    cached = CachedBackend(failing, ResponseCache(tmp_path / "c.sqlite"))
    assert isinstance(cached.answer([GenerateRequest(prompt="x")])[0], RequestFailed)
    cached.answer([GenerateRequest(prompt="x")])
    assert failing.calls["generate"] == 2


def test_a_file_that_is_no_database_is_not_called_a_corrupt_cache_to_delete(tmp_path):
    """The cache option pointed at the data or a run.json was told to delete it."""
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'{"text": "this is not a database"}\n' * 100)
    with pytest.raises(ConfigError, match="data.jsonl is not a copyprobe cache .not an SQLite database.: is the cache "
                                          "path the right file") as info:
        ResponseCache(path)
    assert "delete" not in str(info.value)
    assert path.read_bytes() == b'{"text": "this is not a database"}\n' * 100
    zeroed = tmp_path / "c.sqlite"  # a cache whose header a crash zeroed is a damaged cache
    zeroed.write_bytes(b"\0" * 4096)
    with pytest.raises(ConfigError, match="c.sqlite is unreadable or corrupt"):
        ResponseCache(zeroed)


@pytest.mark.parametrize("schema, words", [
    ("CREATE TABLE foo (a)", "it has no 'responses' table but other tables: 'foo'"),
    ("CREATE TABLE meta (name, value)", "it has no 'responses' table but other tables: 'meta'"),
    ("CREATE TABLE responses (a, b, c)", "its 'responses' table has columns a, b, c"),
])
def test_another_database_is_refused_before_anything_is_written(tmp_path, schema, words):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(schema)
    db.close()
    before = path.read_bytes()
    with pytest.raises(ConfigError) as info:
        ResponseCache(path)
    assert f"{path} is an SQLite file but not a copyprobe response cache ({words})" in str(info.value)
    assert path.read_bytes() == before  # no tables added, still in its own journal mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite"]  # no -wal or -shm file


def test_an_empty_file_or_an_existing_cache_opens(tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    ResponseCache(empty).close()
    CachedBackend(FakeBackend(), ResponseCache(tmp_path / "c.sqlite")).answer([TokenLogprobsRequest("a b")])
    again = CachedBackend(FakeBackend(), ResponseCache(tmp_path / "c.sqlite"))
    again.answer([TokenLogprobsRequest("a b")])
    assert again.hits == 1


def test_damaged_entry_is_treated_as_a_miss(tmp_path):
    fake = FakeBackend()
    path = tmp_path / "c.sqlite"
    cached = CachedBackend(fake, ResponseCache(path))
    cached.answer([TokenLogprobsRequest("a b c")])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE responses SET response = '{broken'")
    again = CachedBackend(fake, ResponseCache(path))
    again.answer([TokenLogprobsRequest("a b c")])
    assert again.misses == 1 and fake.calls["token_logprobs"] == 2


def test_two_processes_share_one_cache_file(tmp_path):
    path = tmp_path / "shared.sqlite"
    script = textwrap.dedent(
        f"""
        import sys
        from copyprobe.backends.base import TokenLogprobsRequest
        from copyprobe.backends.cache import CachedBackend, ResponseCache
        from copyprobe.backends.fake import FakeBackend
        cached = CachedBackend(FakeBackend(), ResponseCache({str(path)!r}), chunk_size=3)
        worker = int(sys.argv[1])
        requests = [TokenLogprobsRequest(f"text {{i}} of a shared set") for i in range(200)]
        order = requests if worker == 0 else requests[::-1]
        answers = cached.answer(order)
        assert all(a.logprobs for a in answers)
        print(cached.hits + cached.misses)
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(w)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in (0, 1)]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
        assert out.strip() == "200"
    cache = ResponseCache(path)
    assert cache.count() == 200
    # every stored entry decodes and equals a fresh answer
    fresh = FakeBackend().answer([TokenLogprobsRequest(f"text {i} of a shared set") for i in range(200)])
    stored = CachedBackend(FakeBackend(), cache).answer([TokenLogprobsRequest(f"text {i} of a shared set") for i in range(200)])
    assert stored == fresh


def test_prompts_that_extend_one_another_are_sent_in_the_same_chunk(tmp_path):
    # the word-start prompts of three passages, interleaved as a drive may list them; in
    # chunks of 4 each chunk holds the prompts of one passage (one pass of it in HF)
    passages = ["alpha beta gamma delta epsilon", "one two three four five", "red green blue cyan pink"]
    prompts = [" ".join(p.split()[:n]) for n in range(1, 5) for p in passages]
    fake = FakeBackend()
    fake.streams_results = False  # as the HF backend: answered a chunk at a time
    sent: list[list[str]] = []
    answer = fake.answer
    fake.answer = lambda requests, *a, **k: sent.append([r.prompt for r in requests]) or answer(requests, *a, **k)
    cached = CachedBackend(fake, ResponseCache(tmp_path / "c.sqlite"), chunk_size=4)
    out = cached.answer([GenerateRequest(prompt=p, max_tokens=1, top_logprobs=3) for p in prompts])
    assert [o.text for o in out] == [o.text for o in answer([GenerateRequest(prompt=p, max_tokens=1, top_logprobs=3)
                                                            for p in prompts])]
    assert len(sent) == 3 and all(len({p.split()[0] for p in chunk}) == 1 for chunk in sent)


def test_hits_are_handed_over_at_once_and_misses_as_the_backend_hands_them(tmp_path):
    path = tmp_path / "c.sqlite"
    CachedBackend(FakeBackend(), ResponseCache(path)).answer([TokenLogprobsRequest("known text")])
    events = []

    class Handing(FakeBackend):
        def _answer_token_logprobs(self, requests, progress=None, on_result=None):
            events.append(f"backend asked for {len(requests)}")
            return super()._answer_token_logprobs(requests, progress, on_result)

    cached = CachedBackend(Handing(), ResponseCache(path))
    requests = [TokenLogprobsRequest("new one"), TokenLogprobsRequest("known text"), TokenLogprobsRequest("new two")]
    answers = cached.answer(requests, on_result=lambda i, r: events.append((i, r.token_ids)))
    assert events[0] == (1, answers[1].token_ids)  # the hit, before the backend is asked
    assert events[1] == "backend asked for 2"
    assert sorted(e for e in events[2:]) == [(0, answers[0].token_ids), (2, answers[2].token_ids)]


def test_a_backend_that_hands_over_gets_every_miss_at_once_and_chunks_are_committed_as_reached(tmp_path, monkeypatch):
    import threading
    import time

    from copyprobe.backends import cache as cache_module

    path = tmp_path / "c.sqlite"
    calls, transactions = [], []

    class Handing(FakeBackend):
        streams_results = False  # as the HF backend: not stored answer by answer

        def _answer_token_logprobs(self, requests, progress=None, on_result=None):
            calls.append(len(requests))
            out = []
            for i, request in enumerate(requests):
                out.append(self._token_logprobs(request))
                on_result(i, out[-1])
            return out

    cache = ResponseCache(path)
    real_put = cache.put_encoded

    def put_encoded(fingerprint, kind, items):
        time.sleep(0.05)  # a slow disk: the answers go on meanwhile
        transactions.append((len(items), threading.current_thread() is threading.main_thread()))
        real_put(fingerprint, kind, items)

    cache.put_encoded = put_encoded
    real_entry_text = cache_module.entry_text
    encoded_on_main = []

    def entry_text(answer):
        encoded_on_main.append(threading.current_thread() is threading.main_thread())
        return real_entry_text(answer)

    monkeypatch.setattr(cache_module, "entry_text", entry_text)
    cached = CachedBackend(Handing(), cache, chunk_size=4 * COMMITS_PER_CHUNK)  # a commit every 4 answers
    answers = cached.answer([TokenLogprobsRequest(f"text {i}") for i in range(10)])
    assert calls == [10]
    assert transactions == [(4, False), (4, False), (2, False)]  # an eighth of a chunk a transaction, off the main thread
    assert encoded_on_main == [False] * 10  # encoded there too: the main thread only hands the answers over
    assert ResponseCache(path).count() == 10  # all landed before answer() returned
    reader = CachedBackend(FakeBackend(), ResponseCache(path))
    again = reader.answer([TokenLogprobsRequest(f"text {i}") for i in range(10)])
    assert reader.hits == 10 and again == answers  # what the writer thread encoded reads back as given


def test_holds_says_whether_an_entry_of_that_model_and_kind_is_stored(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    assert not cache.holds("model-a", "token_logprobs")
    cache.put_encoded("model-a", "token_logprobs", [("some key", "{}")])
    assert cache.holds("model-a", "token_logprobs")
    assert not cache.holds("model-b", "token_logprobs")  # another model's entries do not count
    assert not cache.holds("model-a", "generate")  # nor another kind's


@pytest.mark.parametrize("streams", [False, True])
def test_a_models_first_run_makes_no_key_before_the_backend_is_asked(tmp_path, monkeypatch, streams):
    """With nothing of the model stored every request is a miss: the keys are made as the
    answers are stored (on the writer's thread where there is one), not before the first
    forward pass. Stored under the same keys, they are found by the next run."""
    import threading

    from copyprobe.backends.base import Request

    path = tmp_path / "c.sqlite"
    events = []
    real_key = Request.key

    def key(self):
        events.append("key on main" if threading.current_thread() is threading.main_thread() else "key off main")
        return real_key(self)

    monkeypatch.setattr(Request, "key", key)

    class Handing(FakeBackend):
        streams_results = streams

        def _answer_token_logprobs(self, requests, progress=None, on_result=None):
            events.append("backend asked")
            return super()._answer_token_logprobs(requests, progress, on_result)

    requests = [TokenLogprobsRequest(f"text {i}") for i in range(10)]
    cached = CachedBackend(Handing(), ResponseCache(path), chunk_size=4 * COMMITS_PER_CHUNK)
    answers = cached.answer(requests)
    assert events[0] == "backend asked"
    assert events.count("key on main" if streams else "key off main") == 10  # one a stored answer
    events.clear()
    again = CachedBackend(Handing(), ResponseCache(path))
    assert again.answer(requests) == answers and (again.hits, again.misses) == (10, 0)
    assert events == ["key on main"] * 10  # a model with entries: every key made to look them up
    events.clear()
    more = requests[:3] + [TokenLogprobsRequest("a text not seen")]
    partly = CachedBackend(Handing(), ResponseCache(path))
    assert partly.answer(more)[:3] == answers[:3] and (partly.hits, partly.misses) == (3, 1)
    assert events[:5] == ["key on main"] * 4 + ["backend asked"]


def test_a_close_begun_on_a_thread_ends_at_close_and_its_error_is_raised_there(tmp_path, monkeypatch):
    import threading

    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    cache.put_encoded("model", "token_logprobs", [("k", "{}")])
    assert path.with_name("c.sqlite-wal").exists()
    cache.start_closing()
    cache.start_closing()  # once is enough
    cache.close()
    assert not [t for t in threading.enumerate() if t.name == "copyprobe-cache-close"]
    assert not path.with_name("c.sqlite-wal").exists()  # closed: the write-ahead log moved into the file
    with pytest.raises(sqlite3.ProgrammingError):
        cache._db.execute("SELECT 1")
    assert ResponseCache(path).count() == 1
    cache.close()  # again: nothing to do

    failing = ResponseCache(path)

    def close_now():
        raise OSError("disk gone")

    monkeypatch.setattr(failing, "_close_now", close_now)
    failing.start_closing()
    with pytest.raises(OSError, match="disk gone"):
        failing.close()  # raised on the caller's thread, once
    failing.close()
    ResponseCache._close_now(failing)  # the file itself (its close was replaced above)


def test_a_failed_background_commit_fails_the_call_and_keeps_what_landed(tmp_path):
    from copyprobe.errors import BackendError

    path = tmp_path / "c.sqlite"

    class Handing(FakeBackend):
        streams_results = False

    cache = ResponseCache(path)
    real_put = cache.put_encoded
    puts = []

    def put_encoded(fingerprint, kind, items):
        puts.append(len(items))
        if len(puts) == 2:
            raise BackendError("cannot write cache file: disk full")
        real_put(fingerprint, kind, items)

    cache.put_encoded = put_encoded
    with pytest.raises(BackendError, match="disk full"):
        CachedBackend(Handing(), cache, chunk_size=4 * COMMITS_PER_CHUNK).answer(
            [TokenLogprobsRequest(f"t {i}") for i in range(10)])
    assert puts == [4, 4, 2]
    assert ResponseCache(path).count() == 6  # the chunks before and after the failed one landed


def test_float_lists_are_stored_packed_and_read_back_exactly(tmp_path):
    import json
    import math

    from copyprobe.backends.base import TokenLogprobs

    values = [-0.0, 5e-324, -1.2345678901234567, math.nan, -math.inf, 1e300]
    answer = TokenLogprobs(token_ids=list(range(7)), logprobs=values, mu=values[::-1], sigma=[0.5] * 6,
                           rank=[1, 2, 3, 4, 5, 6])

    class Fixed(FakeBackend):
        def _answer_token_logprobs(self, requests, progress=None, on_result=None):
            for i in range(len(requests)):
                on_result(i, answer)
            return [answer] * len(requests)

    path = tmp_path / "c.sqlite"
    CachedBackend(Fixed(), ResponseCache(path)).answer([TokenLogprobsRequest("x")])
    (text,) = sqlite3.connect(path).execute("SELECT response FROM responses").fetchone()
    stored = json.loads(text)
    assert set(stored["logprobs"]) == {"f8"} and set(stored["rank"]) == {"i8"} and set(stored["token_ids"]) == {"i8"}
    again = CachedBackend(FakeBackend(), ResponseCache(path))
    (read,) = again.answer([TokenLogprobsRequest("x")])
    assert again.hits == 1
    for name in ("logprobs", "mu", "sigma"):
        expected = getattr(answer, name)
        got = getattr(read, name)
        assert all(type(v) is float for v in got)
        assert [repr(v) for v in got] == [repr(v) for v in expected]  # bitwise, -0.0 and nan too
    for name in ("token_ids", "rank"):
        assert getattr(read, name) == getattr(answer, name) and all(type(v) is int for v in getattr(read, name))


def test_lists_numpy_cannot_pack_stay_json():
    import json

    from copyprobe.backends.base import TokenLogprobs
    from copyprobe.backends.cache import _decode, packed

    odd = TokenLogprobs(token_ids=[2**70, 1], logprobs=[], mu=None, sigma=[1, 2.5], rank=[True, False])
    data = packed(odd)
    assert data["token_ids"] == [2**70, 1] and data["logprobs"] == [] and data["mu"] is None
    assert data["rank"] == [True, False]  # bools are not ints here
    assert set(data["sigma"]) == {"f8"}  # an int among floats reads back as the float it equals
    assert _decode(TokenLogprobs, json.loads(json.dumps(data))).sigma == [1.0, 2.5]


def _stored_answers():
    """Answers of every response type, with the lists a run's answers hold (arrays kept,
    Values, token strings) and the odd ones that stay JSON."""
    import math

    import numpy as np

    from copyprobe.backends.base import ChoiceLogprobs, Generation, GradNorm, TokenLogprobs, Values

    floats = np.array([-0.0, 5e-324, -1.2345678901234567, math.nan, -math.inf, 1e300])
    ranks = np.arange(1, 7, dtype=np.int64)
    held = TokenLogprobs(token_ids=list(range(7)), logprobs=Values(floats), mu=Values(floats[::-1]),
                         sigma=Values(floats), rank=Values(ranks), tokens=["é", "a\"b", "\x00", "\n", "日本", "x", "y"])
    held.keep_arrays({"logprobs": floats, "mu": floats[::-1], "sigma": floats, "rank": ranks})
    big_endian = TokenLogprobs(token_ids=[1, 2, 3], logprobs=Values(np.array([0.5, -2.0], dtype=">f8")))
    big_endian.keep_arrays({"logprobs": np.array([0.5, -2.0], dtype=">f8")})
    return [
        held,
        big_endian,
        TokenLogprobs(token_ids=[5], logprobs=[]),
        TokenLogprobs(token_ids=[2**70, 1], logprobs=[], mu=None, sigma=[1, 2.5], rank=[True, False]),
        TokenLogprobs(token_ids=(3, 4), logprobs=[0.1], mu=[float("nan")], sigma=[1e-300], rank=[1]),
        Generation(text="dé\u2028jà \"vu\"", finish_reason="stop", prompt_tokens=3, completion_tokens=2,
                   top_logprobs=[{"a": -0.1, "ü": -2.5}]),
        Generation(text=""),
        ChoiceLogprobs(logprobs={"A": -0.5, "B": -1.25}),
        GradNorm(global_norm=1.5, mean_tensor_norm=0.25, loss=3.0),
    ]


@pytest.mark.parametrize("index", range(len(_stored_answers())))
def test_entry_text_is_the_text_packed_and_encoded(index):
    """The writer's fast stored text equals the JSON encoder's of the packed answer,
    character for character, and reads back as the same answer."""
    import json

    import numpy as np

    from copyprobe.backends.cache import _decode, entry_text, packed

    answer = _stored_answers()[index]
    text = entry_text(answer)
    assert text == ResponseCache.encode(packed(answer))
    assert text == json.dumps(packed(answer), separators=(",", ":"))  # an independent encoder
    read = _decode(type(answer), json.loads(text))
    assert read is not None
    np.testing.assert_equal(read.to_json(), answer.to_json())  # nan equals nan here; an int its float


def _reference_decode(response_type, data):
    """What a stored entry reads as, by the plain rules: the field names exactly the
    type's, each packed list base64 of its dtype, each value of a JSON type its annotation
    names (a type not named in the table passes), then ``from_json``."""
    import base64
    import binascii
    import dataclasses

    import numpy as np

    from copyprobe.backends.cache import _number_list_fields

    fields = {f.name: str(f.type) for f in dataclasses.fields(response_type)}
    if not isinstance(data, dict) or set(data) != set(fields):
        return None
    data = dict(data)
    for name, key in _number_list_fields(response_type):
        value = data.get(name)
        if isinstance(value, dict) and set(value) == {key} and isinstance(value[key], str):
            try:
                raw = base64.b64decode(value[key], validate=True)
                data[name] = np.frombuffer(raw, dtype={"f8": "<f8", "i8": "<i8"}[key]).tolist()
            except (binascii.Error, ValueError):
                return None
    kinds = {"None": type(None), "list": list, "tuple": list, "dict": dict, "str": str, "int": int,
             "float": (int, float), "bool": bool}
    for name, annotation in fields.items():
        value = data[name]
        bases = [part.strip().split("[")[0].strip() for part in annotation.split("|")]
        if not any(base not in kinds or (isinstance(value, kinds[base]) and not (
                base in ("int", "float") and isinstance(value, bool))) for base in bases):
            return None
    try:
        return response_type.from_json(data)
    except (TypeError, ValueError, KeyError, AttributeError):
        return None


ODD_VALUES = [None, 1, 1.5, True, "x", [1, 2], {"a": 1}, {"f8": "AAAAAAAA8D8="}, {"i8": "AQAAAAAAAAA="},
              {"f8": "AAAAAAAA8D8=", "x": 1}, {"f8": "!!"}, {"i8": 3}]


@pytest.mark.parametrize("index", range(len(_stored_answers())))
def test_an_entry_reads_back_as_the_plain_rules_say(index):
    """Every field of a stored answer replaced by values of other JSON types, packed lists
    damaged or of the other dtype, fields added and taken away: read back as the plain
    rules read it, or refused where they refuse it (an entry of another version)."""
    import json

    import numpy as np

    from copyprobe.backends.cache import _decode, entry_text

    answer = _stored_answers()[index]
    kind = type(answer)
    data = json.loads(entry_text(answer))
    variants = [data, {**data, "added_by_a_newer_version": 1}, dict(list(data.items())[1:]), [data], "text"]
    variants += [{**data, name: odd} for name in data for odd in ODD_VALUES]
    refused = 0
    for variant in variants:
        expected = _reference_decode(kind, json.loads(json.dumps(variant)))
        read = _decode(kind, json.loads(json.dumps(variant)))
        assert (read is None) == (expected is None), variant
        if read is None:
            refused += 1
        else:
            np.testing.assert_equal(read.to_json(), expected.to_json())
    assert 4 <= refused < len(variants)


def test_entries_written_as_plain_lists_are_read_and_damaged_packed_ones_recomputed(tmp_path):
    import json

    fake = FakeBackend()
    path = tmp_path / "c.sqlite"
    requests = [TokenLogprobsRequest("plain old entry"), TokenLogprobsRequest("damaged entry")]
    fresh = CachedBackend(fake, ResponseCache(path)).answer(requests)
    db = sqlite3.connect(path)
    plain, damaged = (fake.canonical(r).key() for r in requests)  # the key of what is answered
    db.execute("UPDATE responses SET response = ? WHERE key = ?", (json.dumps(fresh[0].to_json()), plain))
    (text,) = db.execute("SELECT response FROM responses WHERE key = ?", (damaged,)).fetchone()
    broken = json.loads(text)
    broken["logprobs"] = {"f8": "not base64!"}
    db.execute("UPDATE responses SET response = ? WHERE key = ?", (json.dumps(broken), damaged))
    db.commit()
    again = CachedBackend(fake, ResponseCache(path))
    assert again.answer(requests) == fresh
    assert (again.hits, again.misses, again.stale) == (1, 1, 1)


def _damage_the_key_index(path):
    """Overwrite the root page of the responses' key index with 0xff bytes (a disk error,
    a bad copy): the header and schema still read, so the file opens."""
    with sqlite3.connect(path) as db:
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_responses_1'").fetchone()[0]
    db.close()
    raw = bytearray(path.read_bytes())
    raw[(root - 1) * page_size : root * page_size] = b"\xff" * page_size
    path.write_bytes(bytes(raw))


def _filled_cache(path, n=200):
    cache = ResponseCache(path)
    CachedBackend(FakeBackend(), cache).answer([TokenLogprobsRequest(f"text {i} " * 40) for i in range(n)])
    cache.close()


def test_a_damaged_cache_is_refused_before_anything_is_read_or_written(tmp_path):
    path = tmp_path / "c.sqlite"
    _filled_cache(path)
    _damage_the_key_index(path)
    cache = ResponseCache(path)  # the file's check runs beside the model's loading
    fake = FakeBackend()
    with pytest.raises(ConfigError, match="c.sqlite is unreadable or corrupt") as refused:
        CachedBackend(fake, cache).answer([TokenLogprobsRequest("text 1 " * 40)])
    assert fake.calls["token_logprobs"] == 0
    message = str(refused.value)
    assert "\n" not in message and "more problem" in message  # quick_check's report is hundreds of lines
    for use in (lambda: cache.put_many("f", "token_logprobs", [("k", {"a": 1})]), cache.count):
        with pytest.raises(ConfigError, match="unreadable or corrupt"):  # every later use too
            use()
    cache.close()


def test_a_damaged_cache_closed_unused_raises_nothing_and_leaves_no_thread(tmp_path):
    # a run whose model failed to load closes the cache: that failure is the one to report
    import threading

    path = tmp_path / "c.sqlite"
    _filled_cache(path)
    _damage_the_key_index(path)
    ResponseCache(path).close()
    healthy = tmp_path / "ok.sqlite"
    _filled_cache(healthy)
    ResponseCache(healthy).close()
    assert not [t for t in threading.enumerate() if t.name.startswith("copyprobe-cache-check")]


def test_nothing_is_written_to_a_damaged_cache(tmp_path):
    # damage away from the key index: a lookup may read past it, and the first write then
    # waits for the file's check, which refuses it
    path = tmp_path / "c.sqlite"
    _filled_cache(path)
    with sqlite3.connect(path) as db:
        page_size, pages = db.execute("PRAGMA page_size").fetchone()[0], db.execute("PRAGMA page_count").fetchone()[0]
    db.close()
    raw = bytearray(path.read_bytes())
    middle = pages // 2
    raw[(middle - 1) * page_size : middle * page_size] = b"\xff" * page_size
    path.write_bytes(bytes(raw))
    cache = ResponseCache(path)
    with pytest.raises(ConfigError, match="unreadable or corrupt"):
        CachedBackend(FakeBackend(), cache).answer([TokenLogprobsRequest("a text not in the cache " * 20)])
    cache.close()
    assert path.read_bytes() == bytes(raw)


class _ServerBackend(FakeBackend):
    """A backend whose check asks its server (as an API model's does), recording what."""

    def __init__(self, down: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.down = down
        self.checked: list[list[str]] = []

    def check(self, requests):
        self.checked.append([r.text if hasattr(r, "text") else r.prompt for r in requests])
        if self.down:
            from copyprobe.errors import BackendError

            raise BackendError("cannot reach the server")
        super().check(requests)


def test_the_wrapped_check_asks_the_server_only_for_what_the_cache_cannot_answer(tmp_path):
    """The cache's check was its own capability check alone, so an API target's look for
    its server never ran before work (drive checks the target before another model loads),
    and a run the cache answers whole must not need the server."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    server = _ServerBackend()
    cached = CachedBackend(server, cache)
    stored = [TokenLogprobsRequest("stored one"), GenerateRequest(prompt="stored prompt")]
    cached.answer(stored[:1])
    cached.answer(stored[1:])
    server.checked.clear()
    cached.check(stored)  # all in the cache: the server is not asked
    assert server.checked == []
    cached.check(stored + [TokenLogprobsRequest("new text"), GenerateRequest(prompt="p", temperature=0.8)])
    # the miss and the unseeded sample (never cached) are checked; what is stored is not
    assert sorted(server.checked[0]) == ["new text", "p"]

    down = CachedBackend(_ServerBackend(down=True), cache)  # same fingerprint: its answers are stored
    down.check(stored)
    assert down.answer(stored[:1])[0] is not None and down.hits == 1
    with pytest.raises(Exception, match="cannot reach"):
        down.check([TokenLogprobsRequest("new text")])
    empty = CachedBackend(_ServerBackend(down=True, spec="other"), cache)  # nothing of this model stored
    with pytest.raises(Exception, match="cannot reach"):
        empty.check(stored)


def test_what_the_servers_check_settled_refuses_misses_not_stored_answers(tmp_path):
    """A probe that finds no prompt log-probs narrowed the cache's own capabilities, so a
    later call whose answers were all stored was refused too."""
    from copyprobe.backends.base import TOKEN_LOGPROBS
    from copyprobe.errors import CapabilityError

    class Unable(_ServerBackend):
        def check(self, requests):
            self.capabilities = self.capabilities - {TOKEN_LOGPROBS}  # what the probe found
            super().check(requests)

    cache = ResponseCache(tmp_path / "c.sqlite")
    stored = [TokenLogprobsRequest("stored one")]
    CachedBackend(FakeBackend(), cache).answer(stored)
    cached = CachedBackend(Unable(), cache)  # same fingerprint: "fake"
    with pytest.raises(CapabilityError, match="token_logprobs"):
        cached.check(stored + [TokenLogprobsRequest("new text")])
    assert cached.answer(stored)[0].logprobs and cached.hits == 1


def test_stored_keys_reads_keys_in_batches_past_sqlites_parameter_limit(tmp_path):
    import sqlite3

    cache = ResponseCache(tmp_path / "c.sqlite")
    if not hasattr(cache._db, "setlimit"):  # Python < 3.11
        pytest.skip("sqlite3.Connection.setlimit needs Python 3.11")
    cache._db.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 600)  # one batch of 500 keys + 2 fit
    keys = [f"k{i}" for i in range(1200)]
    cache.put_many("fp", "generate", [(k, {"text": k}) for k in keys[::2]])
    assert cache.stored_keys("fp", "generate", keys) == set(keys[::2])
    assert cache.stored_keys("fp", "token_logprobs", keys) == set()


@pytest.mark.parametrize("said", ["attempt to write a readonly database", "unable to open database file"])
def test_a_cache_sqlite_cannot_write_is_called_read_only_not_corrupt(tmp_path, monkeypatch, said):
    """A sound cache on a read-only file or folder was 'unreadable or corrupt; delete it'."""
    path = tmp_path / "c.sqlite"
    ResponseCache(path).close()

    def refuse(self):
        raise sqlite3.OperationalError(said)

    monkeypatch.setattr(ResponseCache, "_open", refuse)
    with pytest.raises(ConfigError) as caught:
        ResponseCache(path)
    assert "cannot be opened or written" in str(caught.value) and "read-only" in str(caught.value)
    assert "corrupt" not in str(caught.value) and "delete" not in str(caught.value)


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() == 0,
                    reason="root writes read-only files")
def test_a_read_only_cache_folder_is_said_read_only(tmp_path):
    import os

    folder = tmp_path / "ro"
    folder.mkdir()
    ResponseCache(folder / "c.sqlite").close()
    for name in os.listdir(folder):
        os.chmod(folder / name, 0o444)
    os.chmod(folder, 0o555)
    try:
        with pytest.raises(ConfigError, match="cannot be opened or written .*read-only"):
            ResponseCache(folder / "c.sqlite")
    finally:
        os.chmod(folder, 0o755)


@pytest.mark.parametrize("said, resumes", [("database or disk is full", True), ("disk I/O error", False)])
def test_a_full_disk_while_storing_says_what_was_kept(tmp_path, said, resumes):
    from copyprobe.errors import BackendError

    cache = ResponseCache(tmp_path / "c.sqlite")
    real = cache._db

    class Failing:  # the connection, whose writes fail as SQLite's do on a full disk
        def __enter__(self):
            return real.__enter__()

        def __exit__(self, *exc):
            return real.__exit__(*exc)

        def execute(self, sql, *args):
            return real.execute(sql, *args)

        def executemany(self, sql, *args):
            raise sqlite3.OperationalError(said)

    cache._db = Failing()
    try:
        with pytest.raises(BackendError) as caught:
            cache.put_many("fp", "token_logprobs", [("k", {"a": 1})])
    finally:
        cache._db = real
        cache.close()
    assert said in str(caught.value)
    assert ("free some space: the answers stored before are kept" in str(caught.value)) is resumes
