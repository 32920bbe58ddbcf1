"""Hostile and broken inputs at every entry point: no hang, no traceback, nothing lost.

Each family of hostile file (issue 13) is run against the parsers in-process under a time
guard, and against the command line in a subprocess under ``resource.setrlimit`` (memory,
CPU) and a wall-clock timeout: it must end with exit 0, 2 or 3, a message naming the file
or field, and no traceback. A batch around the hostile files loses none of the good RFQs.
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plans import cost, tiny_plan

from solver.batch.runner import run_batch
from solver.catalog.load import load_catalog
from solver.common.errors import InputError, Problem, short
from solver.common.inputs import MAX_DEPTH, parse_json, parse_yaml
from solver.optimize.plan_model import Plan
from solver.rfq.overrides import apply_overrides, parse_assignment
from solver.rfq.schema import iter_csv_rfqs, load_rfq, validate_rfq

ROOT = Path(__file__).resolve().parent.parent
GOOD = ("id: good-{n}\nworkloads:\n  - {{name: chat, kind: inference, model: llama-3.1-8b,\n"
        "     concurrency: 4, input_tokens: 500, output_tokens: 100}}\n")
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)) + "id: *i\n"
MEMORY_LIMIT = 2 * 1024**3
CPU_LIMIT_S = 60


def hostile_files() -> dict[str, bytes]:
    """The corpus: name -> content. Every one must be refused cleanly (exit 2)."""
    deep_json = "[" * 5000 + "]" * 5000
    deep_yaml = "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v: 1\n"
    good = GOOD.format(n="x")
    return {
        "bomb.yaml": BOMB.encode(),
        "self-alias.yaml": b"id: &a [*a]\nworkloads: []\n",
        "deep.json": deep_json.encode(),
        "deep-flow.yaml": ("id: " + "[" * 5000 + "]" * 5000 + "\n").encode(),
        "deep-block.yaml": deep_yaml.encode(),
        "huge-int.yaml": good.replace("concurrency: 4", "concurrency: " + "9" * 5000).encode(),
        "huge-int.json": ('{"id": "x", "n": ' + "9" * 5000 + "}").encode(),
        "dup-key.yaml": ("id: a\n" + good).encode(),
        "dup-key.json": b'{"id": "a", "id": "b", "workloads": []}',
        "bool-int.yaml": good.replace("concurrency: 4", "concurrency: true").encode(),
        "latin1.yaml": good.replace("good-x", "caf\u00e9").encode("latin-1"),
        "nan.yaml": good.replace("concurrency: 4", "concurrency: 4, qps: .nan").encode(),
        "inf.json": json.dumps({**yaml.safe_load(good), "budget_usd": float("inf")}).encode(),
        "python-tag.yaml": b"id: !!python/object/apply:os.system ['echo pwned']\n",
        "unknown-tag.yaml": b"id: !custom x\nworkloads: []\n",
        "list.yaml": b"- a\n- b\n",
        "scalar.json": b"42",
        "empty.yaml": b"",
        "nul.yaml": good.replace("good-x", "a\x00b").encode(),
        "long-id.yaml": good.replace("good-x", "x" * 1_000_000).encode(),
        "path-id.yaml": good.replace("good-x", "../../etc/passwd").encode(),
        "markup-id.yaml": good.replace("good-x", "'[bold red]x[/]'").encode(),
        "surrogate.json": b'{"id": "\\ud800", "workloads": []}',
        "context.yaml": good.replace("input_tokens: 500", "input_tokens: 1999000").encode(),
        "binary.json": bytes(range(256)),
        "syntax.yaml": b"id: [unclosed\n",
        "syntax.json": b'{"id": ',
    }


def good_files() -> dict[str, bytes]:
    return {f"good-{n}.yaml": GOOD.format(n=n).encode() for n in range(3)} | {
        "good-bom.yaml": b"\xef\xbb\xbf" + GOOD.format(n="bom").encode(),
        "good-bom.json": b"\xef\xbb\xbf" + json.dumps(yaml.safe_load(GOOD.format(n="bomj")))
        .encode(),
    }


def write(folder: Path, files: dict[str, bytes]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in files.items():
        (folder / name).write_bytes(data)
        paths.append(folder / name)
    return paths


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT_S, CPU_LIMIT_S))


def procure(*args: str, timeout: float = 60, cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a subprocess under memory/CPU limits and a wall-clock timeout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    env.pop("PROCURE_DEBUG", None)
    return subprocess.run([sys.executable, "-c", "from solver.cli.main import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          preexec_fn=_limits, cwd=cwd, check=False)


def assert_clean(result: subprocess.CompletedProcess[str], codes: tuple[int, ...] = (2,)
                 ) -> None:
    both = result.stdout + result.stderr
    assert result.returncode in codes, both[-3000:]
    assert "Traceback" not in both, both[-3000:]
    assert len(both) < 200_000  # messages are excerpts, not echoes


# --- in-process: every hostile file is an InputError, fast ----------------------------------


@pytest.mark.parametrize("name", sorted(hostile_files()))
def test_hostile_file_is_input_error(name: str, tmp_path: Path, catalog: Any) -> None:
    path = write(tmp_path, {name: hostile_files()[name]})[0]
    started = time.perf_counter()
    with pytest.raises(InputError) as info:
        load_rfq(path, catalog)
    assert time.perf_counter() - started < 10  # generous; the bomb used to take > 600 s
    text = str(info.value)
    assert str(path) in text
    assert len(text) < 5000


def test_good_files_with_bom_load(tmp_path: Path, catalog: Any) -> None:
    for path in write(tmp_path, good_files()):
        assert load_rfq(path, catalog).id.startswith("good-")


def test_bomb_message_names_the_alias_expansion() -> None:
    with pytest.raises(InputError, match="alias bomb"):
        parse_yaml(BOMB, "bomb.yaml")


@pytest.mark.parametrize(("text", "reason"), [
    ("id: a\nid: b\n", "duplicate key 'id'"),
    ("x: 1" + "0" * 60, "61 digits"),
    ("a: &a [*a]", "refers to itself"),
])
def test_yaml_strictness(text: str, reason: str) -> None:
    with pytest.raises(InputError, match=reason):
        parse_yaml(text, "f.yaml")


def test_yaml_merge_keys_are_not_duplicates() -> None:
    assert parse_yaml("b: &b {x: 1, y: 2}\nc: {<<: *b, y: 3}\n", "f")["c"] == {"x": 1, "y": 3}


def test_json_depth_and_duplicates() -> None:
    nested = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    with pytest.raises(InputError, match="nested"):
        parse_json(nested, "f.json")
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "f.json") is not None
    with pytest.raises(InputError, match="duplicate key 'a'"):
        parse_json('{"a": 1, "a": 2}', "f.json")


def test_bool_for_number_names_the_field(catalog: Any, rfq_data: dict) -> None:
    rfq_data["workloads"][0]["concurrency"] = True
    with pytest.raises(InputError) as info:
        validate_rfq(rfq_data, catalog, "r.yaml")
    assert info.value.problems[0].field == "workloads[0].concurrency"


def test_short_is_bounded_for_huge_and_self_expanding_values() -> None:
    value: Any = ["x"]
    for _ in range(40):
        value = [value] * 10  # 10^40 leaves when walked
    started = time.perf_counter()
    assert len(short(value)) <= 80
    assert "digits" in short(10**6000)
    assert len(str(Problem("f", "id", "x" * 10**6, "r" * 10**6))) < 2000
    assert time.perf_counter() - started < 1


# --- CSV batches --------------------------------------------------------------------------


CSV_HEADER = "id,name,kind,model,concurrency,input_tokens,output_tokens\n"


@pytest.mark.parametrize(("body", "reason"), [
    (CSV_HEADER.encode() + b"a,w,inference,llama-3.1-8b,4,500,100\nb,w,inference,caf\xe9,4,5,5\n",
     "not UTF-8"),
    ((CSV_HEADER + "a,w,inference,llama-3.1-8b,4,500," + "1" * 200_000 + "\n").encode(),
     "row 2"),
    ((CSV_HEADER + "a,w,inference,llama-3.1-8b,4,500,100,extra\n").encode(), "more cells"),
    (b"id,id,name\na,b,c\n", "own, non-empty name"),
])
def test_broken_csv_is_one_input_error(body: bytes, reason: str, tmp_path: Path,
                                       catalog: Any) -> None:
    path = tmp_path / "b.csv"
    path.write_bytes(body)
    with pytest.raises(InputError, match=reason):
        list(iter_csv_rfqs(path, catalog))


def test_csv_with_bom_and_huge_number(tmp_path: Path, catalog: Any) -> None:
    path = tmp_path / "b.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (CSV_HEADER + "a,w,inference,llama-3.1-8b,4,500,100\n"
                                        "b,w,inference,llama-3.1-8b," + "9" * 5000
                                        + ",500,100\n").encode())
    results = dict(iter_csv_rfqs(path, catalog))
    assert results["a"].id == "a"
    assert isinstance(results["b"], InputError)


# --- batch: nothing lost ------------------------------------------------------------------


def _fake_solve(rfq: Any, catalog: Any, **_: Any) -> Plan:
    if rfq.id == "good-boom":
        raise RuntimeError("x" * 100_000)
    return tiny_plan(rfq=rfq.id, cost=cost(1.0))


def test_batch_around_hostile_files_loses_no_good_rfq(tmp_path: Path) -> None:
    write(tmp_path / "in", hostile_files() | good_files()
          | {"boom.yaml": GOOD.format(n="boom").encode()})
    (tmp_path / "bad.csv").write_bytes(CSV_HEADER.encode() + b"c,w,x,\xff\n")
    db = tmp_path / "r.sqlite"
    summary = run_batch([tmp_path / "in", tmp_path / "bad.csv"], db, workers=1,
                        solve_fn=_fake_solve,
                        export=tmp_path / "r.xlsx")
    good = {yaml.safe_load(GOOD.format(n=n))["id"] for n in (0, 1, 2, "bom", "bomj")}
    import sqlite3

    with sqlite3.connect(db) as con:
        rows = dict(con.execute("SELECT rfq, status FROM results"))
        errors = [e for (e,) in con.execute("SELECT error FROM results WHERE status='error'")]
    assert {rfq for rfq, status in rows.items() if status == "optimal"} == good
    assert rows["good-boom"] == "error" and len(errors[0]) < 1000
    # every file is accounted for: hostile ones as invalid (by id or by file name)
    assert summary.total == len(hostile_files()) + len(good_files()) + 2
    assert summary.exported == summary.total


def test_batch_lock_refuses_a_second_run(tmp_path: Path) -> None:
    from solver.batch.store import ResultStore

    write(tmp_path / "in", good_files())
    with ResultStore(tmp_path / "r.sqlite", lock=True), \
            pytest.raises(InputError, match="another procure batch"):
        run_batch([tmp_path / "in"], tmp_path / "r.sqlite", workers=1, solve_fn=_fake_solve)
    summary = run_batch([tmp_path / "in"], tmp_path / "r.sqlite", workers=1,
                        solve_fn=_fake_solve)  # lock released: runs
    assert summary.by_status == {"optimal": len(good_files())}


def test_batch_refuses_unwritable_export_and_db_before_solving(tmp_path: Path) -> None:
    write(tmp_path / "in", good_files())
    calls: list[str] = []

    def solve(rfq: Any, catalog: Any, **_: Any) -> Plan:
        calls.append(rfq.id)
        return _fake_solve(rfq, catalog)

    for kwargs in ({"export": "/proc/procure-x.csv"}, {"export": tmp_path}):
        with pytest.raises(InputError, match="--export"):
            run_batch([tmp_path / "in"], tmp_path / "r.sqlite", workers=1, solve_fn=solve,
                      **kwargs)
    with pytest.raises(InputError, match="--db"):
        run_batch([tmp_path / "in"], "/proc/procure-x.sqlite", workers=1, solve_fn=solve)
    assert calls == []


# --- catalog overlays and --set -----------------------------------------------------------


OVERLAYS: dict[str, tuple[dict[str, bytes], str]] = {
    "bomb": ({"costs.yaml": BOMB.encode()}, "alias bomb"),
    "list-costs": ({"costs.yaml": b"- 1\n- 2\n"}, "must be a mapping"),
    "number-gpus": ({"gpus.yaml": b"42\n"}, "must be a list"),
    "latin1": ({"gpus.yaml": "- id: caf\u00e9\n".encode("latin-1")}, "not UTF-8"),
    "dup-ids": ({"gpus.yaml": b"- {id: l4, tdp_w: 70}\n- {id: l4, tdp_w: 80}\n"}, "id given twice"),
    "gpu-is-server": ({"gpus.yaml": b"- {id: pcie-8gpu}\n"}, "also used by"),
    "alias-shadows": ({"models.yaml": b"- {id: mistral-7b, aliases: [llama-3.1-8b]}\n"},
                      "also used by"),
    "inf-memory": ({"gpus.yaml": b"- {id: l4, memory_gb: .inf}\n"}, "finite"),
    "bool-slots": ({"servers.yaml": b"- {id: pcie-8gpu, gpu_slots: true}\n"}, "whole number"),
    "junk-efficiency": ({"efficiency.yaml": b"families: 3\n"}, "efficiency"),
    "one-column-prices": ({"prices.csv": b"id,price_usd\nl4\n"}, "1 cells"),
    "dup-prices": ({"prices.csv": b"id,price_usd\nl4,1\nl4,2\n"}, "priced twice"),
    "no-header-prices": ({"prices.csv": b"l4,1\n"}, "header"),
    "huge-int": ({"gpus.yaml": b"- {id: l4, tdp_w: " + b"9" * 5000 + b"}\n"}, "digits"),
}


@pytest.mark.parametrize("case", sorted(OVERLAYS))
def test_catalog_overlay_rejected(case: str, tmp_path: Path) -> None:
    files, reason = OVERLAYS[case]
    write(tmp_path / case, files)
    with pytest.raises(InputError) as info:
        load_catalog(str(tmp_path / case))
    assert reason in str(info.value), str(info.value)


def test_prices_csv_with_bom_applies(tmp_path: Path) -> None:
    write(tmp_path, {"prices.csv": b"\xef\xbb\xbfid,price_usd\nl4,1234\n"})
    assert load_catalog(str(tmp_path)).gpus["l4"].price_usd == 1234


@pytest.mark.parametrize(("assignment", "reason"), [
    ("gpu.l4.memory_gb=.inf", "finite"),
    ("gpu.l4.pcie_gen=true", "whole number"),
    ("model.mistral-7b.aliases=[llama-3.1-8b]", "also used by"),
    ("workloads.chat.concurrency=true", "workloads[0].concurrency"),
    ("rfq.budget_usd=" + "9" * 5000, "digits"),
])
def test_set_rejected(assignment: str, reason: str, catalog: Any, rfq_data: dict) -> None:
    rfq = validate_rfq(rfq_data, catalog)
    with pytest.raises(InputError, match=reason.replace("[", r"\[").replace(".", r"\.")):
        apply_overrides(catalog, rfq, [assignment])


def test_set_bomb_and_overrides_file(catalog: Any, rfq_data: dict, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="alias bomb"):
        parse_assignment("demand=" + BOMB.replace("\n", "\n"))
    path = tmp_path / "o.yaml"
    path.write_text(BOMB)
    with pytest.raises(InputError, match="alias bomb"):
        apply_overrides(catalog, validate_rfq(rfq_data, catalog), None, path)


# --- dashboard uploads --------------------------------------------------------------------


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _lying_zip() -> bytes:
    data = bytearray(_zip({"a.yaml": b"x" * 10_000}))
    # central directory and local header: claim 10 bytes uncompressed
    for sig, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.find(sig)
        data[at + offset:at + offset + 4] = (10).to_bytes(4, "little")
    return bytes(data)


def _corrupt_zip() -> bytes:
    data = bytearray(_zip({"a.yaml": b"id: x\n" * 2000}))
    at = data.find(b"PK\x03\x04") + 30 + len("a.yaml")
    data[at:at + 20] = b"\xff" * 20
    return bytes(data)


def test_upload_zips_never_raise_anything_but_input_error(tmp_path: Path) -> None:
    from dashboards.uploads import unpack_batch

    for index, data in enumerate((_lying_zip(), _corrupt_zip(), b"PK\x03\x04junk")):
        with pytest.raises(InputError):
            unpack_batch([("u.zip", data)], tmp_path / f"u{index}")


def test_upload_names_collide_or_are_odd_but_nothing_is_lost(tmp_path: Path,
                                                             catalog: Any) -> None:
    from dashboards.uploads import rfqs_from_upload, unpack_batch

    members = {"a b.yaml": GOOD.format(n=1).encode(), "a_b.yaml": GOOD.format(n=2).encode(),
               "x.yaml": GOOD.format(n=3).encode(), "x.yaml/y.yaml": GOOD.format(n=4).encode(),
               ("n" * 300) + ".yaml": GOOD.format(n=5).encode()}
    written = unpack_batch([("u.zip", _zip(members)), ("a\x00b.yaml", GOOD.format(n=6).encode()),
                            ("a\x00b.yaml", GOOD.format(n=7).encode())], tmp_path)
    ids = sorted(load_rfq(path, catalog).id for path in written)
    assert ids == [f"good-{n}" for n in range(1, 8)]
    assert [rfq.id for _, rfq in rfqs_from_upload("a\x00b.yaml", GOOD.format(n=8).encode(),
                                                  catalog)] == ["good-8"]
    found = rfqs_from_upload("x\x00.csv", CSV_HEADER.encode() + b"a,w,x,\xff", catalog) \
        if False else None
    assert found is None
    with pytest.raises(InputError, match="not UTF-8"):
        rfqs_from_upload("x\x00.csv", CSV_HEADER.encode() + b"a,w,x,\xff\n", catalog)


# --- the command line, in subprocesses under limits ----------------------------------------


def test_cli_validate_every_hostile_file_at_once(tmp_path: Path) -> None:
    paths = write(tmp_path, hostile_files())
    result = procure("validate", *map(str, paths))
    assert_clean(result)
    for path in paths:  # every file is named in the report
        assert path.name in result.stderr, path.name


def test_cli_solve_estimate_and_overrides_with_bombs(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    good = tmp_path / "good.yaml"
    good.write_text(GOOD.format(n=1))
    assert_clean(procure("solve", str(bomb)))
    result = procure("solve", str(good), "--overrides", str(bomb))
    assert_clean(result)
    assert "alias bomb" in result.stderr
    overlay = tmp_path / "cat"
    write(overlay, {"costs.yaml": BOMB.encode()})
    result = procure("catalog", "validate", "--catalog", str(overlay))
    assert_clean(result)
    assert "costs.yaml" in result.stderr
    result = procure("estimate", "--model", "llama-3.1-8b", "--gpu", "l4", "--gpus", "1",
                     "--kind", "inference", "--input-tokens", "1999000")
    assert_clean(result)
    assert "context window" in result.stderr


def test_cli_batch_with_hostile_files_exits_cleanly(tmp_path: Path) -> None:
    write(tmp_path / "in", hostile_files())
    result = procure("batch", str(tmp_path / "in"), "--db", str(tmp_path / "r.sqlite"),
                     "--workers", "1", "--export", "/proc/x.csv")
    assert_clean(result)
    assert "--export" in result.stderr and not (tmp_path / "r.sqlite").exists()
    result = procure("batch", str(tmp_path / "in"), "--db", str(tmp_path / "r.sqlite"),
                     "--workers", "1", "--export", str(tmp_path / "r.csv"))
    assert_clean(result, (0,))
    assert f"exported {len(hostile_files())} RFQs" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(hostile_files()))
def test_cli_each_hostile_file_alone(name: str, tmp_path: Path) -> None:
    path = write(tmp_path, {name: hostile_files()[name]})[0]
    for command in ("validate", "solve"):
        assert_clean(procure(command, str(path)))


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(OVERLAYS))
def test_cli_each_overlay_alone(case: str, tmp_path: Path) -> None:
    files, reason = OVERLAYS[case]
    write(tmp_path, files)
    result = procure("catalog", "validate", "--catalog", str(tmp_path))
    assert_clean(result)
    assert reason in result.stderr.replace("\n", " ")


@pytest.mark.slow
def test_killed_solve_leaves_no_solver_process(tmp_path: Path) -> None:
    """SIGKILL `procure solve` while CBC runs: the CBC process must go with it."""
    models = ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b", "qwen2.5-14b", "llama-3.1-70b"]
    workloads = []
    for i in range(100):
        model = models[i % len(models)]
        if i % 2:
            workloads.append({"name": f"w{i}", "kind": "inference", "model": model,
                              "concurrency": 8 + i, "input_tokens": 1000, "output_tokens": 200})
        else:
            workloads.append({"name": f"w{i}", "kind": "lora", "model": model,
                              "dataset_tokens": 10**8, "deadline_hours": 72})
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump({"id": "big", "workloads": workloads}))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", "from solver.cli.main import main; main()",
                             "solve", str(path)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        children: list[int] = []
        deadline = time.monotonic() + 240
        while not children and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            children = _cbc_children(proc.pid)
        if not children:
            pytest.skip("the solve finished or never started CBC")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        time.sleep(1.0)
        alive = [pid for pid in children if _alive(pid)]
        for pid in alive:  # do not leave it running when the check fails
            os.kill(pid, signal.SIGKILL)
        assert alive == [], "CBC survived its parent"
    finally:
        if proc.poll() is None:
            proc.kill()


def _cbc_children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if int(fields[1]) == parent and b"cbc" in command.lower():
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# --- fuzzing the RFQ schema ---------------------------------------------------------------


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                    st.text(max_size=20), st.sampled_from(["inference", "lora", "llama-3.1-8b",
                                                           "bf16", "tco", ""]))
KEYS = st.sampled_from(["id", "customer", "horizon_years", "objective", "budget_usd",
                        "constraints", "workloads", "name", "kind", "model", "precision",
                        "concurrency", "qps", "input_tokens", "output_tokens", "requests",
                        "deadline_hours", "dataset_tokens", "epochs", "seq_len", "gpus",
                        "max_nodes", "vendor", "x"])
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(KEYS, inner, max_size=6), max_leaves=25)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.dictionaries(KEYS, VALUES, max_size=8))
def test_fuzz_rfq_schema_only_raises_input_error(data: dict, catalog: Any) -> None:
    try:
        rfq = validate_rfq(data, catalog, "fuzz.yaml")
    except InputError as exc:
        assert all(isinstance(str(p), str) for p in exc.problems)
    else:
        assert rfq.workloads


def test_sensitivity_ranges_stay_inside_the_schema(catalog: Any, rfq_data: dict) -> None:
    from solver.analysis.sensitivity import _demand_headroom, schema_max
    from solver.rfq.overrides import apply_pairs
    from solver.rfq.schema import Rfq

    assert schema_max(Rfq, "horizon_years") == 15
    rfq_data["workloads"][0]["concurrency"] = 900_000
    rfq = validate_rfq(rfq_data, catalog)
    room = _demand_headroom(rfq)
    assert room == pytest.approx((1_000_000 - 1) / 900_000)
    apply_pairs(catalog, rfq, [("demand", room)])  # the sweep's top end is a valid RFQ
    with pytest.raises(InputError, match="concurrency"):
        apply_pairs(catalog, rfq, [("demand", room * 1.01)])


def test_internal_error_is_one_line_and_a_log(capsys: pytest.CaptureFixture[str]) -> None:
    from solver.cli.main import _internal_error

    try:
        raise RuntimeError("boom\n" + "x" * 10_000)
    except RuntimeError as exc:
        with pytest.raises(SystemExit) as info:
            _internal_error(exc)
    assert info.value.code == 1
    message = capsys.readouterr().err.strip()
    assert "Traceback" not in message and len(message.splitlines()) <= 3
    log = Path(message.rsplit("details in ", 1)[1].split()[0])
    try:
        assert "Traceback" in log.read_text() and "boom" in log.read_text()
    finally:
        log.unlink()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root writes read-only files")
def test_read_only_store_refused_before_solving(tmp_path: Path) -> None:
    from solver.batch.store import ResultStore

    db = tmp_path / "r.sqlite"
    with ResultStore(db):
        pass
    db.chmod(0o444)
    with pytest.raises(InputError, match="--db"):
        ResultStore(db, lock=True)


def test_devices_pipes_and_link_loops(tmp_path: Path, catalog: Any) -> None:
    folder = tmp_path / "in"
    write(folder, {"good.yaml": GOOD.format(n=1).encode()})
    (folder / "loop").symlink_to(folder)
    (folder / "zero.yaml").symlink_to("/dev/zero")
    os.mkfifo(folder / "fifo.yaml")
    for name, reason in (("zero.yaml", "a device"), ("fifo.yaml", "named pipe")):
        with pytest.raises(InputError, match=reason):
            load_rfq(folder / name, catalog)
    summary = run_batch([folder], tmp_path / "r.sqlite", workers=1, solve_fn=_fake_solve)
    assert summary.by_status == {"optimal": 1, "invalid": 2}  # recorded, not dropped


# --- special paths (issue 33): one line naming the file, the field and the reason ---------


SPECIAL = ("loop", "proc-mem", "device", "fifo", "long")
"""Paths that are no readable regular file: a symbolic link loop, /proc/self/mem (reading
fails with an I/O error), a device, a named pipe (opening it would block) and a path of
6,000 characters."""
REASONS = {"loop": "symbolic link loop", "proc-mem": "system file", "device": "a device",
           "fifo": "named pipe", "long": "too long"}
NOT_SAID = ("Traceback", "RuntimeError", "OSError", "Errno", "internal error")


def special(kind: str, folder: Path, name: str) -> Path:
    """A path of ``kind`` named ``name`` (its suffix kept) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if kind == "loop":
        path.symlink_to(path)
    elif kind == "proc-mem":
        path.symlink_to("/proc/self/mem")
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path = folder / (("d" * 200 + "/") * 30) / name
    return path


def assert_one_line(code: int, err: str, *names: str, reason: str) -> None:
    assert code == 2, err
    for word in NOT_SAID:
        assert word not in err, err
    lines = [line for line in err.splitlines() if line.startswith("  - ")]
    assert len(lines) == 1, err
    for name in names:
        assert name in lines[0], (name, lines[0])
    assert reason in lines[0], lines[0]


@pytest.mark.parametrize("kind", SPECIAL)
def test_special_path_as_rfq(kind: str, tmp_path: Path, cli: Any) -> None:
    """Issue 33: a symlink loop or a 6,000-character RFQ path gave 'RuntimeError' or
    'OSError [Errno 36]' (exit 1)."""
    path = special(kind, tmp_path, "r.yaml")
    for command in ("validate", "solve"):
        code, _, err = cli(command, str(path))
        assert_one_line(code, err, "r.yaml", reason=REASONS[kind])


@pytest.mark.parametrize("kind", SPECIAL)
def test_special_path_as_model_config(kind: str, tmp_path: Path, cli: Any) -> None:
    """Issue 33: a model config that is a symlink loop, /proc/self/mem or 6,000 characters
    long gave 'RuntimeError'/'OSError [Errno …]' with no field named."""
    config = special(kind, tmp_path, "m.json")
    rfq = tmp_path / "r.yaml"
    rfq.write_text(GOOD.format(n=1).replace("model: llama-3.1-8b", f"model: {config}"))
    code, _, err = cli("solve", str(rfq))
    assert_one_line(code, err, "r.yaml", "workloads[0].model", reason=REASONS[kind])
    code, _, err = cli("fit", "--model", str(config), "--gpu", "l4", "--gpus", "1")
    assert_one_line(code, err, "m.json", reason=REASONS[kind])


@pytest.mark.parametrize("kind", SPECIAL)
def test_special_path_as_overrides_file(kind: str, tmp_path: Path, cli: Any) -> None:
    path = special(kind, tmp_path, "o.yaml")
    rfq = tmp_path / "r.yaml"
    rfq.write_text(GOOD.format(n=1))
    code, _, err = cli("solve", str(rfq), "--overrides", str(path))
    assert_one_line(code, err, "o.yaml", "--overrides", reason=REASONS[kind])


@pytest.mark.parametrize("kind", SPECIAL)
def test_special_path_as_catalog_overlay(kind: str, tmp_path: Path, cli: Any) -> None:
    """The overlay folder itself, and a prices.csv inside a real overlay folder (it was
    skipped without a word when it was a pipe or a dangling link)."""
    folder = special(kind, tmp_path / "a", "cat")
    code, _, err = cli("catalog", "validate", "--catalog", str(folder))
    reason = "not a folder" if kind in ("proc-mem", "device", "fifo") else REASONS[kind]
    assert_one_line(code, err, "cat", "--catalog", reason=reason)
    if kind == "long":
        return
    overlay = tmp_path / "b" / "cat"
    special(kind, overlay, "prices.csv")
    code, _, err = cli("catalog", "validate", "--catalog", str(overlay))
    assert_one_line(code, err, "prices.csv", reason=REASONS[kind])


@pytest.mark.parametrize("kind", SPECIAL)
def test_special_path_as_batch_input(kind: str, tmp_path: Path, cli: Any) -> None:
    """Named on the command line: recorded with its reason (the batch goes on), or - a path
    too long to exist - refused as the usage error it is."""
    good = write(tmp_path / "in", {"good.yaml": GOOD.format(n=1).encode()})[0]
    path = special(kind, tmp_path / "odd", "x.yaml")
    db = tmp_path / "r.sqlite"
    code, out, err = cli("batch", str(good), str(path), "--db", str(db), "--workers", "1",
                         "--export", str(tmp_path / "r.csv"))
    if kind == "long":
        assert_one_line(code, err, "x.yaml", "INPUT", reason=REASONS[kind])
        return
    assert code == 0, out + err
    import csv

    rows = {r["rfq"]: r for r in csv.DictReader((tmp_path / "r.csv").open())}
    assert rows["good-1"]["status"] == "optimal"
    assert rows["x"]["status"] == "invalid"
    assert REASONS[kind] in rows["x"]["error"] and "x.yaml" in rows["x"]["error"]
    for word in NOT_SAID:
        assert word not in rows["x"]["error"]
