"""Compares tools/scifacteval's JSON with the official script's for each system given
(DIR/<system>.go.json beside DIR/<system>.official.json): prints both sides' precision,
recall and F1 of the four metrics and exits 1 when any differs by more than 1e-12.

  python compare.py DIR system...
"""
import json
import sys

METRICS = ["abstract_label_only", "abstract_rationalized", "sentence_selection", "sentence_label"]


def main():
    d, systems = sys.argv[1], sys.argv[2:]
    bad, maxdiff = 0, 0.0
    print(f"{'system':<17} {'metric':<22} {'side':<8} {'P':>18} {'R':>18} {'F1':>18}")
    for s in systems:
        go = json.load(open(f"{d}/{s}.go.json"))
        off = json.load(open(f"{d}/{s}.official.json"))
        for m in METRICS:
            for side, v in (("go", go[m]), ("official", off[m])):
                print(f"{s:<17} {m:<22} {side:<8} {v['precision']:>18.15f} {v['recall']:>18.15f} {v['f1']:>18.15f}")
            for k in ("precision", "recall", "f1"):
                maxdiff = max(maxdiff, abs(go[m][k] - off[m][k]))
                if abs(go[m][k] - off[m][k]) > 1e-12:
                    print(f"MISMATCH {s} {m} {k}: go {go[m][k]!r} official {off[m][k]!r}")
                    bad += 1
    print(f"{len(systems)} systems, {len(systems) * 12} figures, {bad} mismatches, largest difference {maxdiff!r}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
