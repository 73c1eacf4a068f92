"""Export a fabric to containerlab and SimAI (no root): the same ZCube n=4 the testbed
emulates, as a containerlab topology whose GPU containers carry the zcube policy's routes,
and as SimAI's topology file.  Run from the repository's root:

    .venv/bin/python examples/export_fabric.py [OUTPUT_FOLDER]
"""
import os
import sys

from testbed import api


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "results/export"
    os.makedirs(out, exist_ok=True)
    fab = api.fabric("zcube", n=4, gpus_per_server=4)
    files = {"zcube.clab.yml": api.export(fab, "clab", policy="zcube"),
             "zcube.simai.txt": api.export(fab, "simai"),
             "zcube.json": api.export(fab, "json")}      # any zcube verb reads it back
    for name, text in files.items():
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
        print(f"wrote {os.path.join(out, name)} ({len(text.splitlines())} lines)")
    # the containerlab file's header says how to create the bridges and deploy it
    print("then, as root: containerlab deploy -t", os.path.join(out, "zcube.clab.yml"))


if __name__ == "__main__":
    main()
