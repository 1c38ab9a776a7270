"""Lines in a library's model code: a tiny random-init Hugging Face BERT (no download) run
from a script. Each node it makes carries the modeling file's line below the script's line
that led there; --lead-with library puts the library's first; torch's own files never
appear; the gradients are plain PyTorch's."""

from __future__ import annotations

import json
import linecache
from pathlib import Path

import pytest
from helpers import as_read, invoke, needs_dot, write_script
from plain_python import run_plain
from test_html import page, parts

from gradtrace.capture.naming.names import library_file

pytest.importorskip("transformers")
pytestmark = pytest.mark.xdist_group("library_lines")  # the model's run once, on one worker

BERT = """import os
os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is downloaded: the model is made from a config
import torch
from transformers import BertConfig, BertForSequenceClassification

torch.manual_seed(0)
config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=32, num_labels=3)
model = BertForSequenceClassification(config)
out = model(input_ids=torch.randint(0, 100, (2, 8)), labels=torch.tensor([0, 2]))
out.loss.backward()
print("NORM", model.classifier.weight.grad.norm().item())
"""
CALL = 10  # the script's line that runs the model


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    script = write_script(tmp_path_factory.mktemp("bert"), BERT)
    result = invoke("show", script, "--json")
    assert result.exit_code == 0, result.stderr
    return script, as_read(result.stdout)


def test_each_node_of_the_model_carries_its_modeling_file_line(bert: tuple[Path, dict]) -> None:
    _, trace = bert
    ops = [n for n in trace["nodes"] if n["kind"] != "leaf"]
    made = [n for n in ops if n["source"] and n["source"]["line"] == CALL]
    assert len(made) > 50 and all(n.get("library") for n in made)
    for n in made:  # the modeling file's lines, or its helpers' (activations.py: GELU)
        where = n["library"]
        assert "transformers" in Path(where["file"]).parts, where["file"]
        # the line cited is that file's line, and no torch file is ever cited
        assert linecache.getline(where["file"], where["line"]).strip() == where["code"]
    bert_lines = [n for n in made if n["library"]["file"].endswith("modeling_bert.py")]
    assert len(bert_lines) > len(made) / 2
    loss = next(n for n in ops if n["type"] == "NllLossBackward0")
    assert "loss_fct(" in loss["library"]["code"]
    assert not any("/torch/" in n["library"]["file"] for n in ops if n.get("library"))


def test_the_gradients_are_plain_pytorch_s(bert: tuple[Path, dict]) -> None:
    script, trace = bert
    plain = run_plain(script)
    assert plain.returncode == 0, plain.stderr
    expected = float(plain.stdout.split("NORM ")[1])
    (weight,) = [t for t in trace["tensors"] if t["name"] == "model.classifier.weight"]
    assert weight["grad"]["norm"] == pytest.approx(expected, rel=1e-6)


@needs_dot
def test_the_report_leads_with_the_line_asked_for(bert: tuple[Path, dict], tmp_path: Path
                                                  ) -> None:
    _, trace = bert
    saved = tmp_path / "bert.json"
    saved.write_text(json.dumps(trace))
    script_first = invoke("show", saved, "--all").stdout
    assert f"line {CALL} → modeling_bert.py:" in script_first
    library_first = invoke("show", saved, "--all", "--lead-with", "library").stdout
    assert f"from line {CALL}" in library_first and "modeling_bert.py:" in library_first
    dot = invoke("dot", saved, "--lead-with", "library").stdout
    assert "modeling_bert.py:" in dot  # the tooltips name both lines
    data, _ = parts(page(saved, tmp_path, "--lead-with", "library").read_text())
    nodes = [n for box in data["boxes"].values() for n in box["nodes"] if n["library"]]
    assert nodes and all("transformers" in Path(n["source"]["file"]).parts for n in nodes)
    assert {n["library"]["line"] for n in nodes} == {CALL}  # the script's line comes second
    wrong = invoke("show", saved, "--lead-with", "torch")
    assert wrong.exit_code == 2 and "--lead-with 'torch': give script or library" in \
        wrong.stderr


def test_only_installed_model_code_is_a_library_s() -> None:
    assert library_file("/venv/lib/python3.11/site-packages/transformers/models/bert/m.py")
    assert library_file("/usr/lib/python3/dist-packages/timm/models/vit.py")
    assert not library_file("/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py")
    assert not library_file("/venv/lib/python3.11/site-packages/gradtrace/api.py")
    assert not library_file("/home/me/project/model.py")
    assert not library_file("/venv/lib/python3.11/site-packages/six.py")  # a module, no package
