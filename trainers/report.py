"""`spadework report RUN_DIR`: a training run's numbers as PNG plots and one HTML page beside them.

It reads only what the run wrote (`config.json`, `train.jsonl`, `eval.jsonl`, the designer's
`metrics.jsonl`, and TRL's log in the newest trainer checkpoint), so it works on a finished run, a
killed one, or one still going. Every plot has the iteration on its x axis; a plot with nothing to show
yet says so instead of drawing empty axes.
"""

from __future__ import annotations

import html
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.designer.loop import DesignOutcome, IterationMetrics, read_designs, read_metrics, world_file
from trainers.designer.measures import TRENDS, WIN_BANDS, DesignerIteration, designer_summary, per_iteration
from trainers.journal import JournalError
from trainers.run_records import HeldOut, IterationReport, read_held_out, read_iterations
from trainers.run_state import TRAINER_DIR
from trainers.stats import bootstrap_mean, paired_lift


class ReportError(ValueError):
    """The directory is not a training run (or its files do not parse); the message names the file."""


@dataclass(frozen=True)
class RunRecord:
    """Everything a report shows, as read back from a run directory."""

    directory: Path
    config: dict[str, Any]
    iterations: list[IterationReport]
    held_out: list[HeldOut]
    designer: list[IterationMetrics]
    designs: list[DesignOutcome]  # every designer turn, with its verdict and (when valid) its regret
    updates: list[dict[str, float]]  # TRL's per-step log (loss, grad norm, importance ratios, ...)


def read_run(run: Path) -> RunRecord:
    config = run / "config.json"
    if not config.is_file():
        raise ReportError(f"{run} is not a training run: {config.name} is missing (spadework train writes it)")
    try:
        return RunRecord(run, json.loads(config.read_text()), read_iterations(run), read_held_out(run),
                         read_metrics(run), read_designs(run), _update_log(run))  # fmt: skip
    except JournalError as error:
        raise ReportError(str(error)) from None
    except ValueError as error:  # config.json or a trainer state that is not JSON
        raise ReportError(f"{run}: a file does not parse ({error})") from None


def _update_log(run: Path) -> list[dict[str, float]]:
    checkpoints = sorted((run / TRAINER_DIR).glob("checkpoint-*/trainer_state.json"),
                         key=lambda path: int(path.parent.name.rsplit("-", 1)[1]))  # fmt: skip
    if not checkpoints:
        return []
    history = json.loads(checkpoints[-1].read_text()).get("log_history", [])
    return [entry for entry in history if "loss" in entry and "step" in entry]


# ---- plots -------------------------------------------------------------------------------------------

Series = dict[str, tuple[Sequence[float], Sequence[float | None]]]  # label -> (x, y)


def _axes(title: str, ylabel: str, xlabel: str = "iteration") -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.ticker import MaxNLocator

    figure, axes = pyplot.subplots(figsize=(6.4, 3.6), dpi=100, layout="constrained")
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    return figure, axes


def _lines(title: str, ylabel: str, series: Series, xlabel: str = "iteration", unit_range: bool = False,
           empty: str = "nothing recorded yet") -> Any:  # fmt: skip
    figure, axes = _axes(title, ylabel, xlabel)
    drawn = False
    for label, (xs, ys) in series.items():
        points = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
        if points:
            axes.plot(*zip(*points, strict=True), marker="o", label=label)
            drawn = True
    if unit_range:
        axes.set_ylim(-0.05, 1.05)
    if drawn:
        axes.legend(loc="best")
    else:
        _nothing_yet(axes, empty)
    return figure


def _nothing_yet(axes: Any, message: str = "nothing recorded yet") -> None:
    axes.text(0.5, 0.5, message, ha="center", va="center", transform=axes.transAxes, color="gray")


def agent_return(record: RunRecord) -> Any:
    xs = [r.iteration for r in record.iterations]
    return _lines("Training return", "mean reward of the iteration's rows", {
        "agent (episode score)": (xs, [r.agent_return for r in record.iterations]),
        "designer (regret reward)": (xs, [r.designer_reward for r in record.iterations]),
    })  # fmt: skip


def learning_curve(record: RunRecord) -> Any:
    """Held-out suite success and partial credit per evaluation, with 95% bootstrap intervals over tasks."""
    measured = [h for h in record.held_out if h.scored]
    suite = measured[0].suite if measured else "the held-out suite"
    figure, axes = _axes(f"Learning curve: {suite}, held-out tasks", "score", "after iteration (-1: before training)")
    if not measured:
        _nothing_yet(axes)
        return figure
    xs = [h.after_iteration for h in measured]
    for label, values in (("success", HeldOut.successes), ("partial credit", HeldOut.credits)):
        points = [bootstrap_mean(list(values(h).values())) for h in measured]
        means = [p[0] for p in points]
        errors = [[p[0] - p[1] for p in points], [p[2] - p[0] for p in points]]
        axes.errorbar(xs, means, yerr=errors, marker="o", capsize=4, label=f"{label} (95% CI)")
    axes.set_ylim(-0.05, 1.05)
    axes.legend(loc="best")
    return figure


def zero_spread(record: RunRecord) -> Any:
    xs = [r.iteration for r in record.iterations]
    return _lines("GRPO groups without a learning signal", "share of groups with equal rewards", {
        "zero reward spread": (xs, [r.zero_spread_share for r in record.iterations]),
    }, unit_range=True)  # fmt: skip


def held_out(record: RunRecord) -> Any:
    xs = [h.after_iteration for h in record.held_out]
    figure = _lines("Held-out success (full reference tasks, unseen seeds)", "tasks solved", {
        "without hint": (xs, [h.mean_plain for h in record.held_out]),
        "with hint": (xs, [h.mean_hinted for h in record.held_out]),
    }, xlabel="after iteration (-1: before training)", unit_range=True,
       empty="not played (run.eval_seeds=0)" if record.held_out else "nothing recorded yet")  # fmt: skip
    return figure


def designer_validity(record: RunRecord) -> Any:
    xs = [m.iteration for m in record.designer]
    return _lines("Designer validity", "share of replies that pass every gate", {
        "before repair": (xs, [m.validity_before_repair for m in record.designer]),
        "after repair": (xs, [m.validity_after_repair for m in record.designer]),
    }, unit_range=True)  # fmt: skip


def regret(record: RunRecord) -> Any:
    figure, axes = _axes("Regret of valid worlds (hinted - plain mean score)", "regret")
    points = [(m.iteration, value) for m in record.designer for value in m.regrets]
    if not points:
        _nothing_yet(axes)
        return figure
    axes.scatter(*zip(*points, strict=True), alpha=0.6, label="one world")
    means = [(m.iteration, m.regret_mean) for m in record.designer if m.regret_mean is not None]
    axes.plot(*zip(*means, strict=True), color="black", marker="_", markersize=20, linestyle="", label="mean")
    axes.axhline(0.0, color="gray", linewidth=0.8)
    axes.legend(loc="best")
    return figure


def designer_frontier(record: RunRecord) -> Any:
    """Does the designer learn: per iteration, the share of its valid worlds at the agent's frontier, the
    share the agent wins 20-80% of the time unaided, its mean reward, and the valid worlds' mean scores."""
    rows = per_iteration(record.designs, record.designer)
    xs = [row.iteration for row in rows]
    return _lines("Designer: the frontier, iteration by iteration", "share / score", {
        "frontier share (valid worlds)": (xs, [row.frontier_share for row in rows]),
        "unaided win rate 20-80% (share)": (xs, [_share(row.wins["20-80%"], row.valid) for row in rows]),
        "designer reward (mean)": (xs, [row.reward_mean for row in rows]),
        "unaided mean score": (xs, [row.plain_mean for row in rows]),
        "hinted mean score": (xs, [row.hinted_mean for row in rows]),
    })  # fmt: skip


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def diversity_and_leaks(record: RunRecord) -> Any:
    xs = [m.iteration for m in record.designer]
    return _lines("Designer diversity and answer leaks", "value", {
        "Vendi score (tool schemas)": (xs, [m.vendi for m in record.designer]),
        "answer-leak rate": (xs, [m.answer_leak_rate for m in record.designer]),
    })  # fmt: skip


def throughput(record: RunRecord) -> Any:
    xs = [r.iteration for r in record.iterations]
    return _lines("Throughput", "tokens per second", {
        "sampled (designer + agent)": (xs, [_tokens_per_second(r) for r in record.iterations]),
        "trained (update rows)": (xs, [_trained_per_second(r) for r in record.iterations]),
    })  # fmt: skip


def _trained_per_second(report: IterationReport) -> float | None:
    seconds = report.seconds.get("update", 0.0)
    return report.trained_tokens / seconds if report.trained_tokens and seconds > 0 else None


def _tokens_per_second(report: IterationReport) -> float | None:
    seconds = report.seconds.get("design", 0.0) + report.seconds.get("reference", 0.0)
    return report.sampled_tokens / seconds if report.sampled_tokens is not None and seconds > 0 else None


STAGES = ("design", "reference", "archive", "update", "held_out")


def time_split(record: RunRecord) -> Any:
    figure, axes = _axes("Where an iteration's time goes", "minutes")
    if not record.iterations:
        _nothing_yet(axes)
        return figure
    xs = [r.iteration for r in record.iterations]
    bottom = [0.0] * len(xs)
    seconds = stage_seconds(record)
    for stage in STAGES:
        minutes = [seconds[x].get(stage, 0.0) / 60 for x in xs]
        axes.bar(xs, minutes, bottom=bottom, label=_STAGE_LABELS[stage])
        bottom = [b + m for b, m in zip(bottom, minutes, strict=True)]
    axes.set_xticks(xs)
    axes.legend(loc="best")
    return figure


def stage_seconds(record: RunRecord) -> dict[int, dict[str, float]]:
    """Seconds per stage of each iteration, the held-out evaluation after it included."""
    split = {r.iteration: dict(r.seconds) for r in record.iterations}
    for result in record.held_out:
        if result.after_iteration in split:
            split[result.after_iteration]["held_out"] = result.seconds
    return split


_STAGE_LABELS = {"design": "designer + its worlds' plays", "reference": "reference plays", "archive": "archive plays",
                 "update": "GRPO update + weight sync", "held_out": "held-out evaluation"}  # fmt: skip


def update_stats(record: RunRecord) -> Any:
    steps = [entry["step"] for entry in record.updates]
    return _lines("GRPO updates (TRL's log)", "value", {
        "loss": (steps, [entry.get("loss") for entry in record.updates]),
        "grad norm / 100": (steps, [_scaled(entry.get("grad_norm"), 0.01) for entry in record.updates]),
        "importance ratio (mean)": (steps, [entry.get("sampling/importance_sampling_ratio/mean")
                                            for entry in record.updates]),
    }, xlabel="optimiser step")  # fmt: skip


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


PLOTS: dict[str, Callable[[RunRecord], Any]] = {
    "learning-curve": learning_curve,
    "agent-return": agent_return,
    "zero-spread": zero_spread,
    "throughput": throughput,
    "time-split": time_split,
    "held-out": held_out,
    "designer-validity": designer_validity,
    "regret": regret,
    "designer-frontier": designer_frontier,
    "diversity-leaks": diversity_and_leaks,
    "updates": update_stats,
}


# ---- the page ----------------------------------------------------------------------------------------


def write_report(record: RunRecord, out: Path | None = None) -> Path:
    """Render every plot as PNG and `index.html` into `out` (default `RUN_DIR/report`); returns the page."""
    from matplotlib import pyplot

    out = out or record.directory / "report"
    out.mkdir(parents=True, exist_ok=True)
    for name, plot in PLOTS.items():
        figure = plot(record)
        figure.savefig(out / f"{name}.png")
        pyplot.close(figure)
    (out / "summary.json").write_text(json.dumps(summary_json(record), indent=2) + "\n")
    page = out / "index.html"
    page.write_text(_page(record))
    return page


def _measurement(result: HeldOut) -> dict[str, Any]:
    return {"after_iteration": result.after_iteration, "success": round(result.success, 4),
            "partial_credit": round(result.partial_credit, 4), "episodes": len(result.scored),
            "failed_episodes": len(result.tasks) - len(result.scored)}  # fmt: skip


def summary_json(record: RunRecord) -> dict[str, Any]:
    """`report/summary.json`: the held-out suite before and after training, the paired lift in success with
    its 95% bootstrap interval over tasks (and the same for partial credit), the run's minutes and memory."""
    measured = [h for h in record.held_out if h.scored]
    summary: dict[str, Any] = {"suite": measured[0].suite if measured else None, "before": None, "after": None,
                               "lift": None, "lift_ci95": None, "partial_credit_lift": None,
                               "partial_credit_lift_ci95": None,
                               "iterations": len(record.iterations)}  # fmt: skip
    if measured:
        first, last = measured[0], measured[-1]
        summary["before"], summary["after"] = _measurement(first), _measurement(last)
        if last is not first:
            for key, measure in (("lift", HeldOut.successes), ("partial_credit_lift", HeldOut.credits)):
                lift, low, high = paired_lift(measure(first), measure(last))
                summary[key], summary[f"{key}_ci95"] = round(lift, 4), [round(low, 4), round(high, 4)]
    elapsed = [h.elapsed_s for h in record.held_out if h.elapsed_s is not None]
    summary["minutes"] = round(max(elapsed) / 60, 2) if elapsed else None
    memory = [h.peak_rss_gb for h in record.held_out if h.peak_rss_gb is not None]
    summary["peak_rss_gb"] = max(memory) if memory else None
    summary["designer"] = designer_summary(record.designs, record.designer)
    return summary


def summary(record: RunRecord) -> list[tuple[str, str]]:
    """The headline numbers, as (what, value) rows: the page's first table and the console's."""
    planned = record.config.get("run", {}).get("iterations", "?")
    rows = [("preset", str(record.config.get("preset", "?"))),
            ("model", str(record.config.get("policy", {}).get("model", "?"))),
            ("iterations done", f"{len(record.iterations)} of {planned}")]  # fmt: skip
    headline = summary_json(record)
    if headline["before"] is not None:
        before, after = headline["before"], headline["after"]
        rows.append((f"held-out {headline['suite']} success", f"{before['success']:.1%} -> {after['success']:.1%} "
                     f"({after['episodes']} episodes each)"))  # fmt: skip
        if headline["lift_ci95"] is not None:
            low, high = headline["lift_ci95"]
            rows.append(
                ("lift in success (95% CI, paired over tasks)", f"{headline['lift']:+.1%} [{low:+.1%}, {high:+.1%}]")
            )
            low, high = headline["partial_credit_lift_ci95"]
            rows.append(("partial credit", f"{before['partial_credit']:.3f} -> {after['partial_credit']:.3f}, "
                         f"lift {headline['partial_credit_lift']:+.3f} [{low:+.3f}, {high:+.3f}]"))  # fmt: skip
    if record.held_out and record.held_out[0].mean_plain is not None and record.held_out[-1].mean_plain is not None:
        first, last = record.held_out[0], record.held_out[-1]
        for label, before, after in (("without hint", first.mean_plain, last.mean_plain),
                                     ("with hint", first.mean_hinted, last.mean_hinted)):  # fmt: skip
            rows.append((f"full reference tasks, success {label}", f"{before:.1%} (after {first.after_iteration}) -> "
                                                      f"{after:.1%} (after {last.after_iteration})"))  # fmt: skip
    if record.designer:
        before = sum(m.valid_before_repair for m in record.designer)
        after = sum(m.valid_after_repair for m in record.designer)
        replies = sum(m.replies for m in record.designer)
        rows.append(("designer validity (before / after repair)", f"{before}/{replies} / {after}/{replies}"))
        kinds = [cells[2] for cells in designed_worlds(record)]
        written = ", ".join(f"{kinds.count(kind)} {kind}" for kind in sorted(set(kinds))) or "none"
        rows.append(("valid worlds written", written))
    if record.designs:
        designer = headline["designer"]
        regret = "-"
        if designer["regret_ci95"] is not None:
            low, high = designer["regret_ci95"]
            regret = f"{designer['regret_mean']:+.3f} [{low:+.3f}, {high:+.3f}]"
        rows.append(("valid worlds at the frontier; mean regret (95% CI)",
                     f"{designer['frontier']} of {designer['valid']}; {regret}"))  # fmt: skip
        rows.append(("designer groups with reward spread among valid designs",
                     f"{designer['groups_with_valid_spread']} of {designer['groups']}"))  # fmt: skip
        rows.append(("valid worlds grounded in their document", f"{designer['grounded']} of {designer['valid']}"))
        for name, label in TRENDS.items():
            found = designer["trend"][name]
            if found is not None:
                low, high = found["ci95"]
                rows.append((f"trend: {label}, last third - first third (95% CI)",
                             f"{found['first']:.3f} -> {found['last']:.3f}, {found['difference']:+.3f} "
                             f"[{low:+.3f}, {high:+.3f}]"))  # fmt: skip
    split = stage_seconds(record)
    totals = {stage: sum(seconds.get(stage, 0.0) for seconds in split.values()) for stage in STAGES}
    whole = sum(totals.values())
    if whole:
        parts = ", ".join(f"{stage} {value / 60:.1f} min ({value / whole:.0%})" for stage, value in totals.items())
        rows.append(("time in iterations", f"{whole / 60:.1f} min: {parts}"))
    returns = [r.agent_return for r in record.iterations if r.agent_return is not None]
    if returns:
        rows.append(("agent return (mean over iterations)", f"{statistics.fmean(returns):.3f}"))
    return rows


WORLD_COLUMNS = ("iteration", "world", "format", "file", "plain mean", "hinted mean", "regret", "designer reward")


def designed_worlds(record: RunRecord) -> list[list[str]]:
    """The valid worlds the designer wrote, one row each: where the world is and how the agent fared on it."""
    found = []
    for outcome in record.designs:
        path = world_file(record.directory, outcome)
        if path is None or outcome.verdict is None:
            continue
        kind = "spec" if path.suffix == ".json" else "python"
        scores = (_number(outcome.mean_plain, 2), _number(outcome.mean_hinted, 2), _number(outcome.regret, 3),
                  _number(outcome.reward, 3))  # fmt: skip
        found.append([str(outcome.iteration), str(outcome.verdict.get("world")), kind,
                      str(path.relative_to(record.directory)), *scores])  # fmt: skip
    return found


def _page(record: RunRecord) -> str:
    run = record.directory
    headline = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in summary(record))
    columns = ("iteration", "agent rows", "designer rows", "agent return", "designer reward", "zero-spread groups",
               "valid worlds", "sampled tokens/s", "trained tokens/s", *(f"{stage} s" for stage in STAGES))  # fmt: skip
    body = []
    split = stage_seconds(record)
    for r in record.iterations:
        cells = (r.iteration, r.rows.get("agent", 0), r.rows.get("designer", 0), _number(r.agent_return),
                 _number(r.designer_reward), _number(r.zero_spread_share, 2), r.valid_worlds,
                 _number(_tokens_per_second(r), 1), _number(_trained_per_second(r), 1),
                 *(_number(split[r.iteration].get(stage), 1) for stage in STAGES))  # fmt: skip
        body.append("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in cells) + "</tr>")
    figures = "".join(f'<figure><img src="{name}.png" alt="{name}"></figure>' for name in PLOTS)
    worlds = (
        "".join(
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in cells) + "</tr>"
            for cells in designed_worlds(record)
        )
        or f'<tr><td colspan="{len(WORLD_COLUMNS)}">no valid world yet</td></tr>'
    )

    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>spadework run {html.escape(run.name)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1400px}}table{{border-collapse:collapse;margin:1em 0}}
th,td{{border:1px solid #ccc;padding:4px 8px;text-align:left}}figure{{display:inline-block;margin:4px}}</style>
</head><body>
<h1>spadework training run: {html.escape(str(run))}</h1>
<table>{headline}</table>
{figures}
<h2>The designer per iteration</h2>
{_designer_table(per_iteration(record.designs, record.designer))}
<h2>Designed worlds (valid ones)</h2>
<table><tr>{"".join(f"<th>{html.escape(c)}</th>" for c in WORLD_COLUMNS)}</tr>{worlds}</table>
<h2>Iterations</h2>
<table><tr>{"".join(f"<th>{html.escape(c)}</th>" for c in columns)}</tr>{"".join(body)}</table>
</body></html>
"""


DESIGNER_COLUMNS = ("iteration", "valid / replies", "at the frontier",
                    *(f"unaided wins {band}" for band in WIN_BANDS), "mean regret", "unaided mean",
                    "hinted mean", "designer reward", "grounded", "Vendi", "leak rate")  # fmt: skip


def _designer_table(rows: list[DesignerIteration]) -> str:
    """Validity, frontier, the unaided win rates' bands, regret, scores, reward, Vendi and leaks per iteration."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in DESIGNER_COLUMNS)
    body = []
    for row in rows:
        cells = (row.iteration, f"{row.valid}/{row.replies}", row.frontier, *row.wins.values(),
                 _number(row.regret_mean), _number(row.plain_mean), _number(row.hinted_mean),
                 _number(row.reward_mean), row.grounded, _number(row.vendi, 2), _number(row.leak_rate, 2))  # fmt: skip
        body.append("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in cells) + "</tr>")
    empty = f'<tr><td colspan="{len(DESIGNER_COLUMNS)}">no designer iteration yet</td></tr>'
    return f"<table><tr>{head}</tr>{''.join(body) or empty}</table>"


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
