#!/usr/bin/python3
"""Plot the SAU experiment protocol's CSV results.

Usage: plot.py OUT

Reads the CSV files the experiment program writes into OUT and writes PNGs next to them:

  error_vs_r.png  DGP-A relative error against r (number of random features), one panel per
                  sweep (features, gamma, a, tau), with each fitted log-log slope and its 95%
                  interval in the legend and the claimed r^-1/2 rate (seed 000) beside it.
  error_vs_t.png  DGP-A relative error against stream position t, one line per gamma; the
                  claim is that for gamma < 1 the error does not grow with t.
  drift.png       One DGP-C drift run: the e-process margin with alarms, the RJ gap against
                  its threshold, beta_floor and lambda_*, and shr, with the regime changes.
  delays.png      DGP-C detection delays after a regime change, and the stationary
                  false-alarm fraction against alpha (Ville's inequality, eq. (38)).
  monitors.png    The shr (M1) and clip-rate (C4) monitors against r, with their targets.
  dgp_b.png       DGP-B: the low-rank readout's error beside its two terms in eq. (27), the
                  geometric error of U and the full readout's feature error, for U the
                  data's own subspace, a drawn one or one learned from the stream.
  ablation_clip.png  The log-domain clip c_hi = mean + c sd: error and clip rate against c.
  latency.png     Cost per operation against the stream length n: the SAU flat, exact
                  attention's query linear.
  engines_recall.png  Recall of N bindings of correlated keys for the prf, ridge and vla
                  engines, against N and against the number of filler events after them.
  engines_norm.png  VLA's state norm ||S||_F against t beside plain linear attention's.
  lmu_probes.png  The LMU delta's largest probe counts against their bounds, filling with
                  random ids and with ids aimed at one bucket.
  lmu_rebuild.png The LMU base's build time against the number of ids, beside the T_rb the
                  scheduling inequality (L3) assumes.
  ablation_numerics.png  Arithmetic error of the readout against t with compensated sums and
                  extended-precision denominators on and off, beside a quad-precision reference.
  ablation_lambda.png  The stabilized readout's error and shr for lambda calibration strategies.
  feature_grid.png  The error of i.i.d. rows, SRHT rows and antithetic pairs relative to orthogonal
                  rows, across d, the input scale a and r.

A missing or empty CSV skips its figure with a note on stderr.
"""

import csv
import json
import math
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DPI = 72
SWEEP_COLUMN = {"features": "features", "gamma": "gamma", "scale": "input_scale", "tau": "tau_mult"}
SWEEP_TITLE = {"features": "random features", "gamma": "decay gamma",
               "scale": "input scale a", "tau": "temperature tau"}


def note(msg):
    print("plot.py: " + msg, file=sys.stderr)


def num(text):
    """The number in a CSV cell, NaN if blank or not a number."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def read_csv(out, name, columns, consequence="skipping its figure"):
    """Rows of OUT/name as dicts, or None (with a note) if missing, empty or lacking columns."""
    path = os.path.join(out, name)
    if not os.path.exists(path):
        note(f"{name} not found, {consequence}")
        return None
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
    if missing:
        note(f"{name} lacks columns {', '.join(missing)}, {consequence}")
        return None
    if not rows:
        note(f"{name} has no rows, {consequence}")
        return None
    return rows


def read_setting(out, keys, default):
    """run.json's settings.<keys...> as a number, or default (with a note) if absent."""
    try:
        with open(os.path.join(out, "run.json")) as f:
            value = json.load(f)["settings"]
        for key in keys:
            value = value[key]
        return float(value)
    except (OSError, ValueError, KeyError, TypeError):
        note(f"no settings.{'.'.join(keys)} in run.json, using {default}")
        return default


def mean(values):
    values = [v for v in values if not math.isnan(v)]
    return sum(values) / len(values) if values else math.nan


def means_by(rows, key, x, y):
    """{key value: ([x sorted], [mean of y over rows with that key and x])}."""
    groups = defaultdict(lambda: defaultdict(list))
    for row in rows:
        groups[key(row)][num(row[x])].append(num(row[y]))
    return {k: (sorted(g), [mean(g[xv]) for xv in sorted(g)]) for k, g in groups.items()}


def factor_value(sweep, text):
    """The varied factor's value in one sweep: a name for features, else a number."""
    return text if sweep == "features" else num(text)


def factor_label(sweep, value):
    if sweep == "features":
        return value
    return {"gamma": "gamma={:g}", "scale": "a={:g}", "tau": "tau={:g} x base"}[sweep].format(value)


def r_ticks(ax, rs):
    """Tick a log r axis at the measured r values, written as plain numbers."""
    rs = sorted(set(rs))
    rs = rs if len(rs) <= 8 else rs[::2]
    ax.set_xticks(rs)
    ax.set_xticklabels([f"{r:g}" for r in rs])
    ax.minorticks_off()


def save(fig, out, name):
    path = os.path.join(out, name)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print(f"wrote {path}")


def plot_error_vs_r(out):
    rows = read_csv(out, "dgp_a_r.csv", ["sweep", "r", "rel_error"] + list(SWEEP_COLUMN.values()))
    if rows is None:
        return
    fits = {}
    fit_rows = read_csv(out, "dgp_a_fit.csv", ["sweep", "slope", "ci_low", "ci_high"],
                        "plotting error_vs_r.png without slopes")
    for fit in fit_rows or []:
        sweep = fit["sweep"]
        if sweep in SWEEP_COLUMN and SWEEP_COLUMN[sweep] in fit:
            fits[(sweep, factor_value(sweep, fit[SWEEP_COLUMN[sweep]]))] = fit
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, sweep in zip(axes.flat, SWEEP_COLUMN):
        column = SWEEP_COLUMN[sweep]
        mine = [row for row in rows if row["sweep"] == sweep]
        ax.set_title(f"DGP-A, varying {SWEEP_TITLE[sweep]}", fontsize=10)
        ax.set_xlabel("r (random features)")
        ax.set_ylabel("relative error vs exact attention")
        if not mine:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
            continue
        lines = means_by(mine, lambda row: factor_value(sweep, row[column]), "r", "rel_error")
        anchor = None
        for value in sorted(lines):
            rs, errs = lines[value]
            label = factor_label(sweep, value)
            fit = fits.get((sweep, value))
            if fit is not None:
                label += (f", slope {num(fit['slope']):.2f}"
                          f" [{num(fit['ci_low']):.2f}, {num(fit['ci_high']):.2f}]")
            ax.loglog(rs, errs, marker="o", markersize=4, label=label)
            if anchor is None:
                anchor = (rs[0], errs[0])
        all_r = sorted({num(row["r"]) for row in mine})
        r0, e0 = anchor
        ax.loglog(all_r, [e0 * math.sqrt(r0 / r) for r in all_r], "--", color="grey",
                  label="r^-1/2 (seed 000)")
        r_ticks(ax, all_r)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, out, "error_vs_r.png")


def plot_error_vs_t(out):
    rows = read_csv(out, "dgp_a_t.csv", ["gamma", "r", "t", "rel_error"])
    if rows is None:
        return
    r_values = sorted({num(row["r"]) for row in rows})
    lines = means_by(rows, lambda row: (num(row["r"]), num(row["gamma"])), "t", "rel_error")
    fig, ax = plt.subplots(figsize=(7, 4))
    for (r, gamma) in sorted(lines):
        ts, errs = lines[(r, gamma)]
        label = f"gamma={gamma:g}" + (f", r={r:g}" if len(r_values) > 1 else "")
        ax.loglog(ts, errs, marker="o", markersize=3, label=label)
    ax.set_title("DGP-A, r = " + ", ".join(f"{r:g}" for r in r_values))
    ax.set_xlabel("t (events in the stream)")
    ax.set_ylabel("relative error vs exact attention")
    ax.text(0.02, 0.95, "claim: gamma < 1: error should not grow with t",
            transform=ax.transAxes, va="top", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    save(fig, out, "error_vs_t.png")


def regime_changes(rows):
    return [num(row["t"]) for prev, row in zip(rows, rows[1:]) if row["cluster"] != prev["cluster"]]


def plot_drift(out):
    columns = ["t", "cluster", "margin", "alarm", "rj_level", "rj_gap", "rj_threshold",
               "beta_floor", "lambda_star", "shr"]
    rows = read_csv(out, "dgp_c_trace.csv", columns)
    if rows is None:
        return
    t = [num(row["t"]) for row in rows]
    col = {c: [num(row[c]) for row in rows] for c in columns[2:]}
    fig, axes = plt.subplots(4, 1, figsize=(10, 8), sharex=True)
    ax = axes[0]
    ax.plot(t, col["margin"], lw=0.8, label="margin log(1/alpha) - log E_mix")
    ax.axhline(0, color="black", lw=0.8)
    alarms = [i for i, a in enumerate(col["alarm"]) if a == 1]
    ax.plot([t[i] for i in alarms], [col["margin"][i] for i in alarms], "v", color="red",
            markersize=5, label=f"alarm ({len(alarms)})")
    ax.set_ylabel("margin")
    ax = axes[1]
    ax.plot(t, col["rj_gap"], lw=0.8, label="RJ gap (16a)")
    ax.plot(t, col["rj_threshold"], lw=1.0, color="black", label="threshold (39)")
    for level, colour, name in ((1, "gold", "yellow"), (2, "red", "red")):
        ax.fill_between(t, 0, 1, where=[v == level for v in col["rj_level"]], color=colour,
                        alpha=0.25, transform=ax.get_xaxis_transform(), label=f"RJ {name}")
    ax.set_ylabel("RJ gap")
    ax = axes[2]
    for c, label in (("beta_floor", "beta_floor (28)"), ("lambda_star", "lambda_* (37)")):
        pts = [(x, y) for x, y in zip(t, col[c]) if y > 0]
        if pts:
            ax.plot(*zip(*pts), lw=0.8, label=label)
    ax.set_yscale("log")
    ax.set_ylabel("floor, ridge")
    ax = axes[3]
    ax.plot(t, col["shr"], lw=0.8, label="shr = den / (den + lambda_*)")
    ax.set_ylabel("shr (M1)")
    ax.set_xlabel("t (event)")
    changes = regime_changes(rows)
    for ax in axes:
        for x in changes:
            ax.axvline(x, color="grey", ls=":", lw=0.8)
        ax.legend(fontsize=7, loc="best")
    axes[0].set_title(f"DGP-C drift run: {len(changes)} regime changes (dotted)")
    fig.tight_layout()
    save(fig, out, "drift.png")


def plot_delays(out):
    empty = "leaving its panel of delays.png empty"
    delays = read_csv(out, "dgp_c_delays.csv", ["seed", "rows", "delay", "alarms_before"], empty)
    stationary = read_csv(out, "stationary.csv", ["seed", "rows", "alarmed"], empty)
    if delays is None and stationary is None:
        note("so delays.png is skipped")
        return
    layouts = [("unpaired", "tab:blue"), ("antithetic", "tab:orange")]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4),
                                      gridspec_kw={"width_ratios": [2, 1]})
    if delays is None:
        left.text(0.5, 0.5, "dgp_c_delays.csv missing", transform=left.transAxes, ha="center")
        left.set_axis_off()
    else:
        # delay = horizon + 1 means no alarm within the horizon: counted, not drawn.
        horizon = read_setting(out, ["e_process", "horizon"], math.inf)
        titles = []
        for layout, color in layouts:
            mine = [row for row in delays if row["rows"] == layout]
            if not mine:
                continue
            d = sorted(num(row["delay"]) for row in mine)
            found = [x for x in d if x <= horizon]
            seeds = {row["seed"] for row in mine}
            before = len({row["seed"] for row in mine if num(row["alarms_before"]) > 0})
            if found:
                lo, hi = int(found[0]), int(found[-1])
                bins = [x - 0.5 for x in range(lo, hi + 2)] if hi - lo <= 60 else 30
                left.hist(found, bins=bins, color=color, alpha=0.6, edgecolor="white",
                          label=f"{layout} rows")
            titles.append(f"{layout}: {len(d)} changes / {len(seeds)} seeds, median"
                          f" {d[len(d) // 2]:g}, {len(d) - len(found)} undetected,"
                          f" {before} seeds alarmed away")
        left.set_title("DGP-C detection delays\n" + "\n".join(titles), fontsize=8)
        left.set_xlabel("delay (events after the regime change until the first alarm)")
        left.set_ylabel("changes")
        left.legend(fontsize=8)
    if stationary is None:
        right.text(0.5, 0.5, "stationary.csv missing", transform=right.transAxes, ha="center")
        right.set_axis_off()
    else:
        alpha = read_setting(out, ["alpha"], 0.05)
        top, labels = 0.0, []
        for i, (layout, color) in enumerate(layouts):
            alarmed = [num(row["alarmed"]) for row in stationary if row["rows"] == layout]
            if not alarmed:
                continue
            n, k = len(alarmed), int(sum(alarmed))
            band = 3 * math.sqrt(alpha * (1 - alpha) / n)
            right.bar([i], [k / n], width=0.5, color=color)
            top = max(top, alpha + 1.5 * band, k / n * 1.2)
            labels.append(f"{layout}\n{k} of {n}")
        right.axhline(alpha, color="black", ls="--", lw=1, label=f"alpha = {alpha:g}")
        right.errorbar([0.5], [alpha], yerr=[band], color="black", capsize=6,
                       label=f"alpha +/- 3 sd ({n} seeds)")
        right.set_xlim(-0.6, 1.6)
        right.set_ylim(0, top)
        right.set_xticks(range(len(labels)))
        right.set_xticklabels(labels, fontsize=8)
        right.set_ylabel("fraction of stationary seeds alarmed")
        right.set_title("stationary streams", fontsize=10)
        right.legend(fontsize=8)
    fig.tight_layout()
    save(fig, out, "delays.png")


def plot_monitors(out):
    rows = read_csv(out, "monitors.csv",
                    ["features", "r", "shr_p10", "shr_median", "shr_p90", "clip_rate"])
    if rows is None:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    key = lambda row: row["features"]  # noqa: E731
    med, p10, p90 = (means_by(rows, key, "r", c) for c in ("shr_median", "shr_p10", "shr_p90"))
    for i, name in enumerate(sorted(med)):
        rs, m = med[name]
        low = [a - b for a, b in zip(m, p10[name][1])]
        high = [b - a for a, b in zip(m, p90[name][1])]
        dodge = 1.04 ** (i - (len(med) - 1) / 2)  # side by side, so the bars can be told apart
        left.errorbar([r * dodge for r in rs], m, yerr=[low, high], marker="o", markersize=4,
                      capsize=3, label=name)
    left.axhspan(0.95, 0.99, color="green", alpha=0.15, label="target (seed 001 M1)")
    left.set_xscale("log")
    r_ticks(left, [num(row["r"]) for row in rows])
    left.set_xlabel("r (random features)")
    left.set_ylabel("shr median (bars: p10-p90)")
    left.set_title("M1 shr = den / (den + lambda_*)", fontsize=10)
    left.legend(fontsize=7, loc="best")
    for name, (rs, c) in sorted(means_by(rows, key, "r", "clip_rate").items()):
        right.plot(rs, c, marker="o", markersize=4, label=name)
    right.axhline(0.01, color="red", ls="--", lw=1, label="target < 1% (seed 001 C4)")
    right.set_xscale("log")
    r_ticks(right, [num(row["r"]) for row in rows])
    right.set_ylim(bottom=0)
    right.set_xlabel("r (random features)")
    right.set_ylabel("clip rate (fraction of inputs)")
    right.set_title("C4 clip rate", fontsize=10)
    right.legend(fontsize=7)
    fig.tight_layout()
    save(fig, out, "monitors.png")


def plot_dgp_b(out):
    rows = read_csv(out, "dgp_b.csv", ["u", "r_v", "r", "geometric", "low_rank", "full"])
    if rows is None:
        return
    floor = 1e-3  # a geometric error of zero (U = the data's subspace) is drawn at the floor
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), sharey=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, u in zip(axes, ("supplied", "drawn", "learned")):
        sub = [row for row in rows if row["u"] == u]
        by_rv = lambda column: sorted(means_by(sub, lambda row: num(row["r_v"]), "r",
                                               column).items())
        for i, (rv, (rs, ys)) in enumerate(by_rv("low_rank")):
            ax.plot(rs, ys, marker="o", markersize=4, color=colours[i],
                    label=f"low-rank readout, r_v={rv:g}")
        for i, (rv, (rs, ys)) in enumerate(by_rv("geometric")):
            ax.plot(rs, [max(y, floor) for y in ys], ls=":", marker="x", color=colours[i],
                    label=f"geometric ||(I-UU^T)y||/||y||, r_v={rv:g}")
        rv, (rs, ys) = by_rv("full")[-1]  # the full readout does not use U
        ax.plot(rs, ys, ls="--", color="black", label="feature error (full readout)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(bottom=floor / 1.5)
        r_ticks(ax, [num(row["r"]) for row in sub])
        ax.set_xlabel("r (random features)")
        title = {"supplied": "U supplied: the data's subspace",
                 "drawn": "U drawn from the seed (the default)",
                 "learned": "U learned: PCA of the decayed value covariance"}[u]
        ax.set_title(f"{title}\n(data of rank 8; zero drawn at {floor:g})", fontsize=9)
    axes[0].set_ylabel("relative error vs exact attention")
    axes[2].legend(fontsize=6, loc="lower left")
    fig.suptitle("DGP-B, docs/SAU.md (27): low-rank error <= geometric + feature error",
                 fontsize=10)
    fig.tight_layout()
    save(fig, out, "dgp_b.png")


def plot_ablation_clip(out):
    rows = read_csv(out, "ablation_clip.csv", ["input_scale", "c_sd", "rel_error", "clip_rate"])
    if rows is None:
        return
    order = sorted({row["c_sd"] for row in rows}, key=lambda c: math.inf if c == "off" else num(c))
    xs = list(range(len(order)))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for a in sorted({num(row["input_scale"]) for row in rows}):
        sub = [row for row in rows if num(row["input_scale"]) == a]
        err = [mean([num(row["rel_error"]) for row in sub if row["c_sd"] == c]) for c in order]
        clip = [mean([num(row["clip_rate"]) for row in sub if row["c_sd"] == c]) for c in order]
        clip = [c if c > 0 else math.nan for c in clip]  # none clipped: not drawn on a log axis
        left.plot(xs, err, marker="o", label=f"a={a:g}")
        right.plot(xs, clip, marker="o", label=f"a={a:g}")
    for ax in (left, right):
        ax.set_xticks(xs)
        ax.set_xticklabels(["off" if c == "off" else f"{num(c):g}" for c in order])
        ax.set_xlabel("c: clip at mean + c sd of the log-feature (default 3)")
        ax.legend(fontsize=7)
    left.set_yscale("log")
    left.set_ylabel("relative error vs exact attention")
    left.set_title("error (r = 256)", fontsize=10)
    right.axhline(0.01, color="red", ls="--", lw=1, label="target < 1% (seed 001 C4)")
    right.set_yscale("log")
    right.set_ylabel("clip rate (fraction of log-features)")
    right.set_title("clip rate (none clipped: no point)", fontsize=10)
    right.legend(fontsize=7)
    fig.tight_layout()
    save(fig, out, "ablation_clip.png")


def plot_latency(out):
    rows = read_csv(out, "latency.csv", ["n", "op", "ns_per_op"])
    if rows is None:
        return
    labels = {"sau_ingest": "SAU ingest", "sau_query": "SAU query",
              "exact_query": "exact attention query"}
    fig, ax = plt.subplots(figsize=(7, 4))
    for op, (ns, ts) in sorted(means_by(rows, lambda row: row["op"], "n", "ns_per_op").items()):
        ax.plot(ns, [t / 1000 for t in ts], marker="o", label=labels.get(op, op))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (events in the stream)")
    ax.set_ylabel("microseconds per operation (median)")
    ax.set_title("O(1) per event: SAU cost flat in n, exact attention's query grows", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, out, "latency.png")


def plot_engines_recall(out):
    rows = read_csv(out, "engines_recall.csv", ["sweep", "engine", "key_corr", "n", "gap", "recall"])
    if rows is None:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    colours = {"prf": "tab:blue", "ridge": "tab:orange", "vla": "tab:green"}
    styles = {"0.5": "--", "0.8": "-"}
    for (sweep, ax, x) in (("n", left, "n"), ("gap", right, "gap")):
        sub = [row for row in rows if row["sweep"] == sweep]
        groups = means_by(sub, lambda row: (row["engine"], row["key_corr"]), x, "recall")
        for (engine, c), (xs, ys) in sorted(groups.items()):
            ax.plot([max(v, 1) if sweep == "gap" else v for v in xs], ys, marker="o",
                    markersize=4, color=colours.get(engine), ls=styles.get(c, "-"),
                    label=f"{engine}, key correlation {c}")
        ax.set_xscale("log")
    ns = sorted({num(row["n"]) for row in rows if row["sweep"] == "n"})
    left.plot(ns, [1 / n for n in ns], color="black", ls=":", lw=1, label="chance 1/N")
    left.legend(fontsize=7, loc="center left")
    left.axvline(64, color="grey", ls=":", lw=1)
    left.text(64, 0.5, " N = d", color="grey", fontsize=8)
    left.set_xlabel("N (bindings written)")
    left.set_ylabel("recall (readout nearest to its own value)")
    left.set_title("recall against N (d = 64, no fillers)", fontsize=10)
    right.set_xlabel("filler events after the bindings (0 drawn at 1)")
    right.set_title("recall against fillers (N = 32)", fontsize=10)
    right.legend(fontsize=7, loc="center right")
    fig.tight_layout()
    save(fig, out, "engines_recall.png")


def plot_engines_norm(out):
    rows = read_csv(out, "engines_norm.csv", ["t", "vla_s_norm", "linear_norm", "sqrt_d"])
    if rows is None:
        return
    t = [num(row["t"]) for row in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(t, [num(row["vla_s_norm"]) for row in rows], marker="o", markersize=3,
            label="VLA ||S||_F")
    ax.plot(t, [num(row["linear_norm"]) for row in rows], marker="o", markersize=3,
            label="linear attention ||sum v k^T||_F")
    ax.axhline(3 * num(rows[0]["sqrt_d"]), color="grey", ls="--", lw=1, label="3 sqrt(d)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("t (writes of unit keys and values, d = 32)")
    ax.set_ylabel("state norm")
    ax.set_title("VLA's state stays bounded; linear attention's grows like sqrt(t)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, out, "engines_norm.png")


def plot_lmu_probes(out):
    rows = read_csv(out, "lmu_probes.csv", ["workload", "inserted", "load", "max_locate",
                                            "locate_bound", "max_insert", "insert_bound",
                                            "stash", "ring", "emergency", "full"])
    if rows is None:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, workload in zip(axes, ("random ids", "ids aimed at one bucket")):
        sub = [row for row in rows if row["workload"] == workload]
        if not sub:
            continue
        x = [num(row["inserted"]) for row in sub]
        ax.plot(x, [num(row["max_locate"]) for row in sub], marker=".", label="largest locate")
        ax.plot(x, [num(row["max_insert"]) for row in sub], marker=".", label="largest insert")
        ax.axhline(num(sub[0]["locate_bound"]), color="tab:blue", ls="--", lw=1,
                   label="locate bound")
        ax.axhline(num(sub[0]["insert_bound"]), color="tab:orange", ls="--", lw=1,
                   label="insert bound")
        refused = ax.twinx()
        refused.plot(x, [num(row["full"]) for row in sub], color="red", ls=":")
        refused.set_ylabel("inserts refused (full: the tripwire's case)", color="red", fontsize=8)
        ax.plot([], [], color="red", ls=":", label="refused (right axis)")
        ax.set_ylim(0, 25)
        ax.set_xlabel("ids inserted")
        ax.set_title(workload, fontsize=10)
    cap = 4096
    axes[0].axvline(0.8 * cap, color="grey", ls=":", lw=1)
    axes[0].text(0.8 * cap, 1, " tau_high 0.8", color="grey", fontsize=8)
    axes[0].set_ylabel("largest probe count so far")
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle("LMU delta (C = 4096): probe counts never exceed their bounds", fontsize=10)
    fig.tight_layout()
    save(fig, out, "lmu_probes.png")


def plot_lmu_rebuild(out):
    rows = read_csv(out, "lmu_rebuild.csv", ["n", "seconds_median", "rebuild_seconds_assumed",
                                             "lambda_max", "headroom"])
    if rows is None:
        return
    n = [num(row["n"]) for row in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(n, [num(row["seconds_median"]) for row in rows], marker="o", label="base build (median of 3)")
    ax.axhline(num(rows[0]["rebuild_seconds_assumed"]), color="grey", ls="--", lw=1,
               label="T_rb assumed by the default spec")
    limit = num(rows[0]["headroom"]) / num(rows[0]["lambda_max"])
    ax.axhline(limit, color="red", ls=":", lw=1,
               label="(C (tau_high - tau_low) - margin) / lambda_max")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("ids in the model (n)")
    ax.set_ylabel("seconds")
    ax.set_title("LMU rebuild time against the scheduling inequality (L3)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, out, "lmu_rebuild.png")


def plot_ablation_numerics(out):
    rows = read_csv(out, "ablation_numerics.csv", ["gamma", "t", "variant", "rel_diff_max"])
    if rows is None:
        return
    gammas = sorted({num(row["gamma"]) for row in rows}, reverse=True)
    fig, axes = plt.subplots(1, len(gammas), figsize=(10, 4), sharey=True, squeeze=False)
    for ax, gamma in zip(axes[0], gammas):
        sub = [row for row in rows if num(row["gamma"]) == gamma]
        for variant, (ts, ys) in sorted(means_by(sub, lambda row: row["variant"], "t",
                                                 "rel_diff_max").items()):
            ax.plot(ts, [max(y, 1e-18) for y in ys], marker="o", markersize=3, label=variant)
        ax.axhline(2.0 ** -53, color="grey", ls=":", lw=1, label="double's unit roundoff")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("t (events)")
        ax.set_title(f"gamma = {gamma:g}", fontsize=10)
    axes[0][0].set_ylabel("largest relative difference from quad precision")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle("Ablation: compensated sums and extended-precision denominators (d = 16, r = 32)",
                 fontsize=10)
    fig.tight_layout()
    save(fig, out, "ablation_numerics.png")


def plot_ablation_lambda(out):
    rows = read_csv(out, "ablation_lambda.csv", ["r", "input_scale", "strategy", "rel_error",
                                                 "shr_mean"])
    if rows is None:
        return
    order = []
    for row in rows:
        if row["strategy"] not in order:
            order.append(row["strategy"])
    xs = list(range(len(order)))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for key in sorted({(row["r"], row["input_scale"]) for row in rows}):
        sub = [row for row in rows if (row["r"], row["input_scale"]) == key]
        err = [mean([num(row["rel_error"]) for row in sub if row["strategy"] == s]) for s in order]
        shr = [mean([num(row["shr_mean"]) for row in sub if row["strategy"] == s]) for s in order]
        label = f"r={key[0]}, a={key[1]}"
        left.plot(xs, err, marker="o", label=label)
        right.plot(xs, shr, marker="o", label=label)
    right.axhspan(0.95, 0.99, color="tab:green", alpha=0.15, label="target (seed 001 M1)")
    for ax in (left, right):
        ax.set_xticks(xs)
        ax.set_xticklabels(order, rotation=20, fontsize=8)
        ax.set_xlabel("lambda")
        ax.legend(fontsize=7)
    left.set_yscale("log")
    left.set_ylabel("relative error vs exact attention (stabilized path)")
    right.set_ylabel("mean shr = den / (den + lambda)")
    fig.suptitle("lambda calibration strategies on DGP-A (seed 001 C3)", fontsize=10)
    fig.tight_layout()
    save(fig, out, "ablation_lambda.png")


def plot_feature_grid(out):
    rows = read_csv(out, "feature_grid.csv", ["d", "input_scale", "r", "features", "rel_error"])
    if rows is None:
        return
    ds = sorted({num(row["d"]) for row in rows})
    rs = sorted({num(row["r"]) for row in rows})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(1, len(ds), figsize=(11, 4), sharey=True, squeeze=False)
    for ax, d in zip(axes[0], ds):
        for i, r in enumerate(rs):
            sub = [row for row in rows if num(row["d"]) == d and num(row["r"]) == r]
            by = means_by(sub, lambda row: row["features"], "input_scale", "rel_error")
            if "orthogonal" not in by:
                continue
            a, base = by["orthogonal"]
            names = {"iid": "i.i.d.", "srht": "SRHT", "orthogonal+antithetic": "antithetic"}
            for kind, style in (("iid", "--"), ("srht", ":"), ("orthogonal+antithetic", "-")):
                if kind in by:
                    ax.plot(a, [x / b for x, b in zip(by[kind][1], base)], ls=style, marker="o",
                            markersize=3, color=colours[i % len(colours)],
                            label=f"{names[kind]}, r={r:g}")
        ax.axhline(1.0, color="grey", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sorted({num(row["input_scale"]) for row in rows}))
        ax.set_xticklabels([f"{x:g}" for x in sorted({num(row["input_scale"]) for row in rows})])
        ax.minorticks_off()
        ax.set_xlabel("input scale a")
        ax.set_title(f"d = {d:g}", fontsize=10)
    axes[0][0].set_ylabel("error / error with orthogonal rows")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle("Feature kinds beside orthogonal rows (below 1: better)", fontsize=10)
    fig.tight_layout()
    save(fig, out, "feature_grid.png")


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: plot.py OUT  (OUT: the directory holding the experiment CSVs)",
              file=sys.stderr)
        return 2
    out = argv[1]
    for figure in (plot_error_vs_r, plot_error_vs_t, plot_drift, plot_delays, plot_monitors,
                   plot_dgp_b, plot_ablation_clip, plot_latency, plot_engines_recall,
                   plot_engines_norm, plot_lmu_probes, plot_lmu_rebuild,
                   plot_ablation_numerics, plot_ablation_lambda, plot_feature_grid):
        figure(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
