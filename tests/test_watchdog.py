"""``--time-limit``'s watchdog (issue 31, solver/common/watchdog.py): when the work does not
stop (HiGHS's presolve does not look at its clock), the ``procure`` process writes the
time-out answer and ends at ``limit x 1.05 + 0.15 s``; a plan in hand is always written.

The solver is made to hang with ``time.sleep`` (which, like HiGHS's run, lets the timer's
thread run) in a child process: the watchdog ends processes, so it is never armed in the
test process itself."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from solver.common import watchdog

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "chat-70b-one-node.yaml"


def _procure(prelude: str, *args: str) -> tuple[int, str, float]:
    """Run the console script's entry in a child after ``prelude`` (patches), timed."""
    code = textwrap.dedent(prelude) + textwrap.dedent(f"""
        import sys
        sys.argv = ["procure", *{list(args)!r}]
        from solver.cli.main import entry
        entry()
        """)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=False)
    return done.returncode, done.stdout, time.perf_counter() - start


def test_a_hung_mip_ends_with_the_time_out_answer_at_the_limit():
    code, out, seconds = _procure("""
        import time
        import solver.optimize.solve as solve
        def hung(*args, **kwargs):
            time.sleep(60)
        solve.run_mip = hung
        """, "solve", str(SCENARIO), "--json", "--time-limit", "1")
    assert code == 4
    plan = json.loads(out)
    assert plan["status"] == "timeout"
    assert plan["infeasibility"]["reasons"] == ["no plan found within the time limit (1 s)"]
    assert seconds < 30  # not the 60 s of the hung solve (the bound is timed in bench/)


def test_the_answer_reaches_stdout_while_the_solver_has_it_silenced():
    """HiGHS runs with file descriptor 1 on /dev/null (its banner): a time-out answer
    written then was lost (exit 4, nothing on stdout), seen once in bench/time_limit_bench.py
    under load."""
    code, out, _ = _procure("""
        import time
        import solver.optimize.solve as solve
        from solver.optimize.backends import _quiet_stdout
        def hung(*args, **kwargs):
            with _quiet_stdout():
                time.sleep(60)
        solve.run_mip = hung
        """, "solve", str(SCENARIO), "--json", "--time-limit", "1")
    assert code == 4
    assert json.loads(out)["status"] == "timeout"


def test_a_plan_in_hand_is_written_however_long_its_assembly_takes():
    """The MIP returns its plan well within 3 s; assembling it is made to take 5 s."""
    code, out, seconds = _procure("""
        import time
        import solver.optimize.solve as solve
        real = solve.assemble
        def slow(*args, **kwargs):
            time.sleep(5)
            return real(*args, **kwargs)
        solve.assemble = slow
        """, "solve", str(SCENARIO), "--json", "--time-limit", "3")
    assert code == 0
    assert json.loads(out)["status"] == "optimal"
    assert seconds > watchdog.fires_at(3.0)  # the timer's moment passed while assembling


def test_the_terminal_answer_says_the_limit_as_given():
    code, out, _ = _procure("""
        import time
        import solver.optimize.solve as solve
        solve.run_mip = lambda *args, **kwargs: time.sleep(60)
        """, "solve", str(SCENARIO), "--time-limit", "1.5")
    assert code == 4
    assert "no plan found within the time limit (1.5 s)" in " ".join(out.split())


def test_not_armed_in_process_or_without_a_limit(monkeypatch):
    """Tests call main() in-process: nothing may end their process. Without a limit nothing
    is armed either; claim() then does nothing."""
    fired: list[int] = []
    with watchdog.armed(0.0, lambda: fired.append(1) or 4):
        time.sleep(0.3)
        watchdog.claim()
    monkeypatch.setattr(watchdog, "_process_owned", True)
    with watchdog.armed(None, lambda: fired.append(1) or 4):
        time.sleep(0.3)
    assert fired == []
    assert watchdog.fires_at(10.0) == 10.0 * 1.05 + 0.15
    assert watchdog.fires_at(10.0) < 10.0 * 1.1 + 0.3
