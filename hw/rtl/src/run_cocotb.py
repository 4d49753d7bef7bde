"""Runs the cocotb tests of a waferstream Verilog export under Icarus (written by
`waferstream export-verilog`, one `test_<module>.py` per module with recorded vectors).

    python3 run_cocotb.py              # every module of manifest.json
    python3 run_cocotb.py MODULE ...   # some of them

Needs `pip install cocotb` (1.8 or later) and Icarus Verilog. Prints `PASS <module>` or
`FAIL <module>` per module and exits 1 if any failed. Builds go to sim_build/<module>.
"""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore", message="Python runners")
from cocotb.runner import get_results, get_runner  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main(selected):
    with open(os.path.join(HERE, "manifest.json")) as f:
        manifest = json.load(f)
    modules = [m for m in manifest["modules"] if m.get("cosim")]
    unknown = set(selected) - {m["name"] for m in modules}
    if unknown:
        print(f"unknown module(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    failed = 0
    for m in modules:
        name = m["name"]
        if selected and name not in selected:
            continue
        build = os.path.join(HERE, "sim_build", name)
        runner = get_runner("icarus")
        runner.build(verilog_sources=[os.path.join(HERE, m["file"])], hdl_toplevel=name, build_dir=build, timescale=("1ps", "1ps"), always=True, log_file=os.path.join(build, "build.log"))
        xml = runner.test(test_module=m["cosim"]["cocotb"][:-3], hdl_toplevel=name, build_dir=build, test_dir=HERE, results_xml=os.path.join(build, "results.xml"), log_file=os.path.join(build, "sim.log"))
        tests, fails = get_results(xml)
        ok = tests > 0 and fails == 0
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name} ({m['cosim']['cycles']} cycles, {tests} test(s), {fails} failed; log {os.path.relpath(os.path.join(build, 'sim.log'), HERE)})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
