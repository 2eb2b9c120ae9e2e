"""HTML feedback from ``results.json``: ``feedback.html`` per student and ``gradebook.html`` for the instructor.

Written after grading from the result files alone (never from the run), so a rerun rebuilds them all.
Self-contained pages: inline CSS, no script, no link out; everything a submission could influence (test
output, names, the grader's notes) is HTML-escaped. A student's page shows the score per test, each
failing case with the message that teaches, and the grader's traffic figures when ``results.json``
carries them under ``scaleout.traffic`` (a list of ``{"case": label, "ranks": [RankStats.as_dict(), ...]}``).
Tests with visibility ``hidden`` show neither score nor output. The gradebook shows, per test, how many
submissions lost points, the mean score and the share of its points kept: where the class struggles.
grading/README.md, "Feedback and public checks".
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from . import results as R

STYLE = """body{font:15px/1.45 system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}.num{text-align:right;font-variant-numeric:tabular-nums}.ok{color:#176117}.lost{color:#a11}
pre{white-space:pre-wrap;background:#f8f8f8;border:1px solid #ddd;padding:.6em;margin:.3em 0}
.bar{display:inline-block;height:.8em;background:#c33}.muted{color:#777}"""
TRAFFIC_KEYS = ("messages_sent", "bytes_sent", "messages_received", "bytes_received")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return 0.0
    return v if v == v and abs(v) != float("inf") else 0.0


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>'
            f"<body>\n{body}\n</body></html>\n")


def _tests(res: dict) -> list[dict]:
    tests = res.get("tests")
    return [t for t in tests if isinstance(t, dict)] if isinstance(tests, list) else []


def _traffic(res: dict) -> str:
    rows = _extra(res).get("traffic")
    if not isinstance(rows, list) or not rows:
        return ""
    out = ["<h2>What your ranks sent (the grader's counts)</h2><table><tr><th>case</th><th>rank</th>"
           + "".join(f"<th>{k.replace('_', ' ')}</th>" for k in TRAFFIC_KEYS) + "</tr>"]
    for row in rows[:50]:
        if not isinstance(row, dict) or not isinstance(row.get("ranks"), list):
            continue
        for r, stats in enumerate(row["ranks"][:64]):
            stats = stats if isinstance(stats, dict) else {}
            out.append(f"<tr><td>{_e(row.get('case', ''))}</td><td class=num>{r}</td>"
                       + "".join(f"<td class=num>{int(_num(stats.get(k))):,}</td>" for k in TRAFFIC_KEYS) + "</tr>")
    return "\n".join(out) + "</table>"


def _extra(res: dict) -> dict:
    return res.get("scaleout") if isinstance(res.get("scaleout"), dict) else {}


def final_score(res: dict) -> tuple[float, float, str]:
    """(score, max_score, how it adds up): ``scaleout.final`` (hand-graded points and the late penalty
    added by the gradebook) when present, else the autograded score."""
    final = _extra(res).get("final")
    if isinstance(final, dict):
        how = (f"autograded {_num(final.get('auto')):g} + by hand {_num(final.get('manual')):g} "
               f"- late {_num(final.get('late_points')):g}")
        return _num(final.get("score")), _num(final.get("max_score")), how
    return _num(res.get("score")), _num(res.get("max_score")), ""


def _manual(res: dict) -> str:
    manual = _extra(res).get("manual")
    if not isinstance(manual, dict) or not isinstance(manual.get("items"), dict):
        return ""
    out = ["<h2>Graded by hand</h2><table><tr><th>item</th><th>score</th></tr>"]
    for k, v in manual["items"].items():
        v = v if isinstance(v, dict) else {}
        got, pts = _num(v.get("score")), _num(v.get("max_score"))
        out.append(f"<tr><td>{_e(k)}</td><td class=num>{got:g} / {pts:g}</td></tr>")
    out.append("</table>")
    if manual.get("comments"):
        out.append(f"<p>Comments:</p><pre>{_e(str(manual['comments'])[:4000])}</pre>")
    return "\n".join(out)


def feedback_html(res: dict, student: str, lab: str = "") -> str:
    """The page a student reads: total, one row per test, then each test's message in full."""
    tests = _tests(res)
    score, max_score, how = final_score(res)
    status = _extra(res).get("status", "")
    title = f"{lab}: feedback for {student}" if lab else f"Feedback for {student}"
    body = [f"<h1>{_e(title)}</h1>", f"<p><b>Score: {score:g} of {max_score:g}</b>"
            + (f" <span class=muted>({_e(how)})</span>" if how else "")
            + (f' <span class=muted>(run: {_e(status)})</span>' if status and status != "ok" else "") + "</p>"]
    summary = str(res.get("output", "")).strip()
    if summary:
        body.append(f"<pre>{_e(summary[:4000])}</pre>")
    body.append("<table><tr><th>test</th><th>score</th><th>result</th></tr>")
    details = []
    for i, t in enumerate(tests):
        name, vis = t.get("name", f"test {i}"), t.get("visibility", "visible")
        if vis == "hidden":
            body.append(f"<tr><td>{_e(name)}</td><td class=num>hidden</td><td class=muted>shown later</td></tr>")
            continue
        pts, got = _num(t.get("max_score")), _num(t.get("score"))
        passed = t.get("status") == "passed" if pts == 0 else got >= pts - 1e-9
        mark = '<span class=ok>passed</span>' if passed else '<span class=lost>failed</span>'
        cell = f"{got:g} / {pts:g}" if pts else "&ndash;"
        body.append(f'<tr><td><a href="#t{i}">{_e(name)}</a></td><td class=num>{cell}</td><td>{mark}</td></tr>')
        text = str(t.get("output", "")).strip()
        if text:
            details.append(f'<h3 id="t{i}">{_e(name)}</h3><pre>{_e(text[:20000])}</pre>')
    body.append("</table>")
    body += ["<h2>What each test saw</h2>", *details] if details else []
    body.append(_manual(res))
    body.append(_traffic(res))
    return _page(title, "\n".join(b for b in body if b))


def class_stats(out: Path) -> tuple[list[tuple[str, dict]], list[dict]]:
    """(submission id, results) for every ``out/<id>/results.json`` and, per test with points, its
    name, points, how many submissions lost points on it, and the mean score."""
    subs = []
    for f in sorted(out.glob("*/results.json")):
        res = R.load_json(f, R.FILE_CAP)
        if isinstance(res, dict):
            subs.append((f.parent.name, res))
    stats: dict[str, dict] = {}
    for _, res in subs:
        for t in _tests(res):
            pts = _num(t.get("max_score"))
            if pts <= 0:
                continue
            s = stats.setdefault(str(t.get("name", "")), {"name": str(t.get("name", "")), "points": pts,
                                                          "lost": 0, "total": 0.0, "n": 0})
            got = _num(t.get("score"))
            s["n"] += 1
            s["total"] += got
            s["lost"] += got < pts - 1e-9
    rows = []
    for s in stats.values():
        s["mean"] = s["total"] / s["n"] if s["n"] else 0.0
        rows.append(s)
    return subs, rows


def gradebook_html(out: Path, lab: str = "") -> str:
    """The instructor's page: per-test statistics (sorted by the share of points kept) and every submission."""
    subs, rows = class_stats(out)
    title = f"{lab}: gradebook" if lab else "Gradebook"
    scores = [final_score(r)[0] for _, r in subs]
    mean = sum(scores) / len(scores) if scores else 0.0
    body = [f"<h1>{_e(title)}</h1>", f"<p>{len(subs)} submissions; mean score {mean:.1f}.</p>",
            "<h2>Where the class struggles</h2>",
            "<table><tr><th>test</th><th>points</th><th>lost it</th><th>mean score</th><th>kept</th></tr>"]
    for s in sorted(rows, key=lambda s: s["mean"] / s["points"]):
        kept = s["mean"] / s["points"]
        body.append(f"<tr><td>{_e(s['name'])}</td><td class=num>{s['points']:g}</td>"
                    f"<td class=num>{s['lost']} of {s['n']}</td><td class=num>{s['mean']:.2f}</td>"
                    f'<td class=num>{kept:.0%} <span class=bar style="width:{(1 - kept) * 6:.2f}em"></span></td></tr>')
    body += ["</table>", "<h2>Submissions</h2>",
             "<table><tr><th>submission</th><th>score</th><th>of</th><th>status</th></tr>"]
    for sid, res in subs:
        score, max_score, _ = final_score(res)
        link = f"{_e(sid)}/feedback.html"
        body.append(f'<tr><td><a href="{link}">{_e(sid)}</a></td><td class=num>{score:g}</td>'
                    f"<td class=num>{max_score:g}</td><td>{_e(_extra(res).get('status', ''))}</td></tr>")
    body.append("</table>")
    return _page(title, "\n".join(body))


def write_feedback(out: Path, lab: str = "") -> tuple[int, Path]:
    """Write ``feedback.html`` beside every ``out/<id>/results.json`` and ``out/gradebook.html``;
    returns (pages written, gradebook path)."""
    out = Path(out)
    n = 0
    for f in sorted(out.glob("*/results.json")):
        res = R.load_json(f, R.FILE_CAP)
        if isinstance(res, dict):
            R.atomic_write(f.parent / "feedback.html", feedback_html(res, f.parent.name, lab))
            n += 1
    path = out / "gradebook.html"
    R.atomic_write(path, gradebook_html(out, lab))
    return n, path
