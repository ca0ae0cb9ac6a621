"""Bad input to `copyprobe plant` and `copyprobe detect` is refused before the model loads
(loading takes ~20 s): one line, exit 2, and no loader called. The loaders are swapped for
ones that record the call, so a check that came too late shows as a loaded model."""

from __future__ import annotations

import json

import pytest

from copyprobe.backends.fake import FakeBackend
from copyprobe.cli.main import main
from copyprobe.errors import ConfigError, SettingError


def _error_line(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


# -- plant --------------------------------------------------------------------------------

@pytest.fixture
def plant_loads(monkeypatch):
    """The base model's tokenizer, config, weights hash and weights: each load recorded, and refused."""
    from copyprobe.plant import finetune

    loaded: list[str] = []

    def loader(name):
        def load(*args, **kwargs):
            loaded.append(name)
            raise ConfigError(f"test: {name} was loaded")
        return load

    for name in ("load_tokenizer", "load_config", "hash_weights", "load_model"):
        monkeypatch.setattr(finetune, name, loader(name))
    return loaded


@pytest.fixture
def plant_inputs(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")  # found as a model directory; never loaded here
    book = tmp_path / "book.txt"
    book.write_text(" ".join(f"w{i % 60}" for i in range(400)))
    return tmp_path


def plant_argv(root, out, *extra):
    return ["plant", "--model", f"hf:{root / 'model'}", "--corpus", str(root / "book.txt"), "--out", str(out),
            "--no-progress", *extra]


def test_plant_refuses_a_missing_corpus_before_the_model_loads(plant_inputs, plant_loads, capsys):
    out = plant_inputs / "o"
    line = _error_line(plant_argv(plant_inputs, out, "--corpus", str(plant_inputs / "nope.txt")), capsys)
    assert line == f"copyprobe: error: corpus not found: {plant_inputs / 'nope.txt'}"
    assert plant_loads == [] and not out.exists()


def test_plant_refuses_a_corpus_that_is_not_text_before_the_model_loads(plant_inputs, plant_loads, capsys):
    latin = plant_inputs / "latin.txt"
    latin.write_bytes("caf\xe9 ".encode("latin-1") * 40)
    line = _error_line(plant_argv(plant_inputs, plant_inputs / "o", "--corpus", str(latin)), capsys)
    assert "is not UTF-8 text" in line and plant_loads == []


@pytest.mark.parametrize("content, needle", [
    ('{"id": "1", "text": "unterminated\n', "invalid JSON on line 1"),
    (None, "background not found"),
])
def test_plant_refuses_a_bad_background_before_the_model_loads(plant_inputs, plant_loads, capsys, content, needle):
    background = plant_inputs / "bg.jsonl"
    if content is not None:
        background.write_text(content)
    out = plant_inputs / "o"
    line = _error_line(plant_argv(plant_inputs, out, "--background", str(background)), capsys)
    assert needle in line and plant_loads == [] and not out.exists()


def test_plant_refuses_an_unusable_out_before_the_model_loads(plant_inputs, plant_loads, capsys):
    taken = plant_inputs / "taken"
    taken.mkdir()
    (taken / "precious.txt").write_text("keep me")
    line = _error_line(plant_argv(plant_inputs, taken), capsys)
    assert line.endswith("is not empty and is not a plant directory; choose another plant directory")
    assert (taken / "precious.txt").read_text() == "keep me"

    a_file = plant_inputs / "book.txt"
    assert "exists and is not a directory" in _error_line(plant_argv(plant_inputs, a_file), capsys)
    below_a_file = plant_inputs / "book.txt" / "plant"
    line = _error_line(plant_argv(plant_inputs, below_a_file), capsys)
    assert line == (f"copyprobe: error: cannot create the plant directory {below_a_file}: "
                    f"{a_file} is not a directory")

    damaged = plant_inputs / "damaged"
    damaged.mkdir()
    (damaged / "plant.json").write_text("not json")
    assert "plant.json is not valid JSON" in _error_line(plant_argv(plant_inputs, damaged), capsys)
    assert (damaged / "plant.json").read_text() == "not json"
    assert plant_loads == []


def test_plant_python_api_refuses_before_loading(plant_inputs, plant_loads):
    from copyprobe.errors import DataError
    from copyprobe.plant.finetune import PlantSettings, plant

    settings = PlantSettings(model=f"hf:{plant_inputs / 'model'}", corpus=str(plant_inputs / "nope"),
                             out=str(plant_inputs / "o"), progress=False)
    with pytest.raises(DataError, match="^corpus not found: "):
        plant(settings)
    assert plant_loads == []


# -- detect -------------------------------------------------------------------------------

@pytest.fixture
def detect_loads(monkeypatch):
    loaded: list[str] = []

    def load_backend(spec, **options):
        loaded.append(spec)
        return FakeBackend(spec=spec)

    monkeypatch.setattr("copyprobe.backends.specs.load_backend", load_backend)
    return loaded


@pytest.fixture
def labelled(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "text": f"passage {i} about the river and the hill",
                                        "label": i % 2}) + "\n" for i in range(12)))
    return data


def detect_argv(data, out, *extra):
    return ["detect", "--model", "fake", "--data", str(data), "--out", str(out), "--no-cache", "--no-progress",
            "--bootstrap", "0", *extra]


def test_detect_refuses_a_missing_prefix_file_before_the_model_loads(labelled, detect_loads, tmp_path, capsys):
    missing = tmp_path / "nope.txt"
    line = _error_line(detect_argv(labelled, tmp_path / "run", "--methods", "con_recall",
                                   "--param", f"con_recall.prefix={missing}"), capsys)
    assert line == (f"copyprobe: error: con_recall.prefix: cannot read prefix file {str(missing)!r}: "
                    "No such file or directory")
    assert detect_loads == []
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    line = _error_line(detect_argv(labelled, tmp_path / "run", "--methods", "recall",
                                   "--param", f"recall.prefix={empty}"), capsys)
    assert line == f"copyprobe: error: recall.prefix: prefix file {str(empty)!r} is empty"
    assert detect_loads == []


def test_detect_refuses_more_training_rows_than_the_data_has_before_the_model_loads(labelled, detect_loads,
                                                                                     tmp_path, capsys):
    line = _error_line(detect_argv(labelled, tmp_path / "run", "--methods", "feature_agg",
                                   "--param", "feature_agg.n_train=50"), capsys)
    assert line == ("copyprobe: error: method 'feature_agg' trains on labelled data: it needs at least 52 labelled "
                    "passages with both classes (>= 3 each) to train on 50 and evaluate the rest; the data has "
                    "6 members and 6 non-members")
    assert detect_loads == []


def test_detect_refuses_an_unknown_dtype_before_the_model_loads(labelled, detect_loads, tmp_path, capsys):
    line = _error_line(detect_argv(labelled, tmp_path / "run", "--methods", "loss", "--dtype", "int8"), capsys)
    assert line == ("copyprobe detect: error: argument --dtype: must be auto, float32, bfloat16 or float16 "
                    "(or fp32, bf16, fp16, half), got 'int8' (see copyprobe detect --help)")
    assert detect_loads == [] and not (tmp_path / "run").exists()  # the directory it made, left empty, is gone


def test_detect_python_api_refuses_before_loading(labelled, detect_loads, tmp_path):
    import copyprobe

    with pytest.raises(SettingError, match=r"^dtype must be auto, float32, bfloat16 or float16 .*got 'int8'$"):
        copyprobe.detect("fake", str(labelled), ["loss"], dtype="int8", cache=False)
    with pytest.raises(ConfigError, match="^con_recall.prefix: cannot read prefix file"):
        copyprobe.detect("fake", str(labelled), ["con_recall"], params={"con_recall": {"prefix": "/no/such/file"}},
                         cache=False)
    assert detect_loads == []


def test_detect_with_the_checks_moved_still_scores(labelled, detect_loads, tmp_path):
    """The prefixes read and the rows drawn before the model loads are the ones scored with."""
    import copyprobe

    prefix = tmp_path / "prefix.txt"
    prefix.write_text("a non-member prefix")
    result = copyprobe.detect("fake", str(labelled), ["con_recall", "recall", "feature_agg"],
                              params={"recall": {"prefix": str(prefix)}, "feature_agg": {"n_train": 6}},
                              dtype="FP16", cache=False, n_bootstrap=0)
    assert detect_loads == ["fake"]
    assert result.scores[["recall", "con_recall", "feature_agg"]].notna().all().all()
    # the rows drawn for the prefixes and the training rows are those drawn before the move
    assert result.run["train_ids"] == {"con_recall": ["2", "3", "4", "5", "6", "7", "8", "9", "10", "11"],
                                       "feature_agg": ["1", "2", "3", "4", "9", "10"]}


# -- audit --------------------------------------------------------------------------------

@pytest.fixture
def documents(tmp_path):
    """One suspect document and three clean ones, two passages each."""
    for name, docs in (("suspect", ["s0"]), ("clean", ["c0", "c1", "c2"])):
        rows = [{"id": f"{d}-{j}", "doc_id": d, "text": f"passage {j} of {d} about the river and the hill"}
                for d in docs for j in range(2)]
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def audit_argv(root, *extra):
    return ["audit", "--model", "fake", "--suspect", str(root / "suspect.jsonl"), "--clean",
            str(root / "clean.jsonl"), "--alpha", "0.3", "--out", str(root / "run"), "--no-cache", "--no-progress",
            "--bootstrap", "0", *extra]


def test_audit_refuses_a_fixed_methods_bad_parameters_before_the_model_loads(documents, detect_loads, capsys):
    """The audit's method, when named, is made and checked against the documents before the
    model loads (it was made once the model was loaded, ~20 s later)."""
    missing = documents / "nope.txt"
    line = _error_line(audit_argv(documents, "--method", "con_recall", "--param", f"con_recall.prefix={missing}"),
                       capsys)
    assert line == (f"copyprobe: error: con_recall.prefix: cannot read prefix file {str(missing)!r}: "
                    "No such file or directory")
    line = _error_line(audit_argv(documents, "--method", "feature_agg"), capsys)
    assert "needs at least 2 suspect and 2 clean documents; the audit has 1 suspect document" in line
    assert detect_loads == []
    # the same method with a good prefix file runs, scored with the prefixes read before the load
    prefix = documents / "prefix.txt"
    prefix.write_text("a non-member prefix")
    assert main(audit_argv(documents, "--method", "recall", "--param", f"recall.prefix={prefix}")) == 0
    assert detect_loads == ["fake"]


@pytest.mark.parametrize("param", ["samia.n_samples", "veilprobe.n_samples", "pac.n_augment",
                                   "neighborhood.n_neighbours"])
def test_a_request_count_per_text_past_a_thousand_is_refused_before_the_model_loads(documents, detect_loads,
                                                                                     capsys, param):
    """samia.n_samples=99999999999999999999999 was accepted and ran until killed (100,000:
    over ten minutes and 1.1 GB, still sampling): each is that many model requests a text."""
    method = param.split(".")[0]
    for value in ("1001", "9" * 23):
        line = _error_line(audit_argv(documents, "--method", method, "--param", f"{param}={value}"), capsys)
        assert "must be an integer in [1, 1000]" in line and param.split(".")[1] in line, line
    assert detect_loads == []
