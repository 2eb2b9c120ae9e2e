"""A multi-hop question-answering agent over the Chapter 25 corpus: questions, the scripted planner, the
tools and the service times of its calls (Chapter 40, Agentic applications, Sections 2-4).

A question needs two or three facts of the corpus (``make_questions``): *earlier* and *gap* compare the
founding years of two countries (two independent lookups, then the calculator); *bridge* follows a chain
(the river of A is named after a city Y, Y is the capital of C, the export of C is asked). The planner
(``AgentPlanner``, deterministic like Chapter 32's) turns each question into a task graph of tool calls:
retrieve -> read per hop, calculator, generate, respond. The tools (``make_tools``) are pure functions of
(args, inputs) that call the parts' functions passed in: the retriever, the extractive reader, the decoder.

``AgentCosts`` holds the service times and prices of a request's stages; ``agentic_budget`` predicts a
request's latency and cost from them, ``agentic_load`` schedules many sessions on a service of K machines.
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = ["Question", "make_questions", "KEYWORDS", "TEMPLATES", "Level", "AgentCosts", "AgentPlanner", "tokenize",
           "read_reverse", "make_tools"]

KEYWORDS = {"capital": "capital", "founded": "founded", "river": "river", "export": "export", "leader": "governed"}
TEMPLATES = {
    "earlier": "Which was founded earlier, {A} or {B}?",
    "gap": "How many years apart were {A} and {B} founded?",
    "bridge": "What is the main export of the country whose capital names the longest river in {A}?",
}
_NAME = r"[A-Z][a-z]+"
_PATTERNS = {kind: re.compile(re.escape(t).replace(r"\{A\}", f"(?P<A>{_NAME})").replace(r"\{B\}", f"(?P<B>{_NAME})"))
             for kind, t in TEMPLATES.items()}


@dataclass(frozen=True)
class Question:
    text: str
    kind: str  # "earlier", "gap" or "bridge"
    entities: tuple[str, ...]
    answer: str  # the ground truth, from the corpus's facts


def make_questions(questions: list[str], answers: list[str], parse: Callable[[str], tuple[str, str]], n: int,
                   seed: int = 0, kinds: tuple[str, ...] = ("earlier", "gap", "bridge")) -> list[Question]:
    """n multi-hop questions over a corpus's single-fact questions and answers (``parse`` gives the
    (relation, country) of one, e.g. ``rag.parse_question``); kinds cycle, entities are seeded draws."""
    if n < 1 or not set(kinds) <= set(TEMPLATES):
        raise ValueError(f"make_questions needs n >= 1 and kinds from {sorted(TEMPLATES)}, got {n} and {kinds}")
    facts = {parse(q): a for q, a in zip(questions, answers)}
    countries = sorted({e for _, e in facts})
    capital_of = {a: e for (rel, e), a in facts.items() if rel == "capital"}
    if len(countries) < 2:
        raise ValueError("make_questions needs a corpus with at least two countries")
    rng = np.random.default_rng(seed)
    out: list[Question] = []
    while len(out) < n:
        kind = kinds[len(out) % len(kinds)]
        a, b = (str(x) for x in rng.choice(countries, 2, replace=False))
        if kind == "bridge":
            city = facts[("river", a)].removesuffix(" river")
            if city not in capital_of:
                continue
            out.append(Question(TEMPLATES[kind].format(A=a), kind, (a,), facts[("export", capital_of[city])]))
            continue
        ya, yb = int(facts[("founded", a)]), int(facts[("founded", b)])
        if ya == yb:
            continue
        ans = (a if ya < yb else b) if kind == "earlier" else str(abs(ya - yb))
        out.append(Question(TEMPLATES[kind].format(A=a, B=b), kind, (a, b), ans))
    return out


@dataclass(frozen=True)
class Level:
    """One rung of the degradation ladder: passages retrieved per hop and new tokens generated."""

    name: str
    k: int
    max_new: int


@dataclass(frozen=True)
class AgentCosts:
    """Service times (simulated seconds) and prices of one request's stages (Section 2).

    LLM calls follow ``llm.iteration_seconds``: an iteration feeding n tokens costs t_fixed + n t_token.
    ``retrieve_s`` is one scatter-gather over the index (measured per K), which occupies ``index_machines``.
    ``usd_per_token`` is the GPU's price per second times its time per token at a full batch of ``batch``.
    A generation prompt holds the question, ``passage_tokens`` of each retrieved passage and the answer.
    """

    t_fixed: float = 0.02
    t_token: float = 2e-4
    retrieve_s: float = 0.1
    index_machines: int = 1
    read_s: float = 1e-3
    calc_s: float = 1e-3
    respond_s: float = 5e-3
    question_tokens: int = 16
    passage_tokens: int = 8
    answer_tokens: int = 4
    call_tokens: int = 6
    batch: int = 8
    gpu_usd_per_hour: float = 0.0
    cpu_usd_per_hour: float = 0.0

    def llm_seconds(self, prompt: int, new: int) -> float:
        """One LLM call alone: n t_fixed + (p + n - 1) t_token (a prefill iteration, n - 1 decode ones)."""
        return new * self.t_fixed + (prompt + new - 1) * self.t_token

    @property
    def usd_per_token(self) -> float:
        return self.gpu_usd_per_hour / 3600 * (self.t_fixed / self.batch + self.t_token)

    def prompt_tokens(self, passages: int) -> int:
        return self.question_tokens + passages * self.passage_tokens + self.answer_tokens

    def planner_tokens(self, calls: int) -> tuple[int, int]:
        """(prompt, output) tokens of the planner call that writes ``calls`` tool calls."""
        return self.question_tokens, self.call_tokens * calls

    def tool_seconds(self, tool: str, args: dict) -> float:
        if tool == "generate":
            return self.llm_seconds(args["prompt_tokens"], args["max_new"])
        seconds = {"retrieve": self.retrieve_s, "read": self.read_s, "calculator": self.calc_s,
                   "respond": self.respond_s}
        if tool not in seconds:
            raise ValueError(f"no service time for tool {tool!r}: the agent's tools are generate and {sorted(seconds)}")
        return seconds[tool]


class AgentPlanner:
    """The scripted planner: ``invoke(messages)`` reads the last user message, one question per line
    ("sid: question"; without "sid:" the line number names it), and returns an assistant message with
    the tool calls of every question, ids prefixed by the session ("q3/read:A"). ``levels[sid]``
    overrides the default level of a session (the budget's decision); the timeouts are
    ``timeout_factor`` times the nominal service time (None: no timeouts)."""

    def __init__(self, costs: AgentCosts, level: Level = Level("full", 3, 16), levels: dict[str, Level] | None = None,
                 timeout_factor: float | None = 4.0):
        self.costs, self.level, self.levels, self.timeout_factor = costs, level, dict(levels or {}), timeout_factor

    def invoke(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        users = [m for m in messages if m.get("role") == "user"]
        if not users:
            raise ValueError("the planner needs at least one message with role 'user'")
        calls, unknown = [], []
        for i, line in enumerate(x.strip() for x in str(users[-1]["content"]).splitlines()):
            if not line:
                continue
            sid, _, text = line.partition(": ") if ": " in line else (f"q{i}", "", line)
            try:
                calls += self.calls(text, sid)
            except ValueError:
                unknown.append(line)
        if unknown or not calls:
            why = unknown or "an empty request"
            return {"role": "assistant", "content": f"I cannot plan {why}.", "tool_calls": []}
        return {"role": "assistant", "content": f"Plan of {len(calls)} tool calls.", "tool_calls": calls}

    def calls(self, text: str, sid: str = "q0") -> list[dict[str, Any]]:
        """The tool calls of one question (ValueError for a question the planner does not know)."""
        level = self.levels.get(sid, self.level)
        found = [(k, m.groupdict()) for k, p in _PATTERNS.items() if (m := p.fullmatch(text))]
        kind, ents = found[0] if found else (None, None)
        if kind is None:
            raise ValueError(f"the planner knows only the templates of agentic.TEMPLATES, got {text!r}")
        out: list[dict[str, Any]] = []

        def hop(tag: str, rel: str, entity: str | None, dep: str | None, **read: Any) -> str:
            # the entity thrice and the relation's keyword: a query rewrite that outweighs the template words
            query = f"{entity} {entity} {entity} {KEYWORDS[rel]}" if entity else "{0} {0} {0} " + KEYWORDS[rel]
            out.append(self._call(f"{sid}/retrieve:{tag}", "retrieve", {"query": query, "k": level.k},
                                  [dep] if dep else []))
            out.append(self._call(f"{sid}/read:{tag}", "read", {"relation": rel, "entity": entity, **read},
                                  [f"{sid}/retrieve:{tag}"] + ([dep] if dep else [])))
            return f"{sid}/read:{tag}"

        if kind == "bridge":
            last = hop("river", "river", ents["A"], None, strip=" river")
            last = hop("capital", "capital", None, last, reverse=True)
            last = hop("export", "export", None, last)
        else:
            reads = [hop(t, "founded", ents[t], None) for t in ("A", "B")]
            out.append(self._call(f"{sid}/calc", "calculator", {"op": kind, "names": [ents["A"], ents["B"]]}, reads))
            last = f"{sid}/calc"
        hops = [c["id"] for c in out if c["name"] == "retrieve"]
        out.append(self._call(f"{sid}/generate", "generate",
                              {"question": text, "max_new": level.max_new,
                               "prompt_tokens": self.costs.prompt_tokens(level.k * len(hops))}, [last] + hops))
        out.append(self._call(f"{sid}/respond", "respond", {"session": sid}, [f"{sid}/generate"]))
        return out

    def _call(self, cid: str, name: str, args: dict, deps: list[str]) -> dict[str, Any]:
        timeout = None
        if self.timeout_factor is not None:
            timeout = round(self.timeout_factor * self.costs.tool_seconds(name, args), 9)
        return {"id": cid, "name": name, "args": args, "depends_on": deps, "timeout": timeout}


def tokenize(text: str, vocab: int, length: int) -> np.ndarray:
    """Words -> ids 1..vocab-1 (crc32, the same in every process), cut or padded with 0 to ``length``."""
    if vocab < 2 or length < 0:
        raise ValueError(f"tokenize needs vocab >= 2 and length >= 0, got {vocab} and {length}")
    ids = [1 + zlib.crc32(w.encode()) % (vocab - 1) for w in re.findall(r"[a-z0-9]+", text.lower())][:length]
    return np.array(ids + [0] * (length - len(ids)), dtype=np.int64)


def read_reverse(template: str, value: str, passages: list[str]) -> str | None:
    """Which entity has ``value`` for the template's relation ("The capital of {E} is {A}." with A known):
    the first match in retrieval order, None if no passage states it."""
    parts = re.split(r"(\{E\}|\{A\})", template)
    pat = re.compile("".join(r"(?P<e>[A-Z][a-z]+)" if t == "{E}" else re.escape(value) if t == "{A}" else re.escape(t)
                             for t in parts))
    for passage in passages:
        for sentence in re.findall(r"[^.]+\.", passage):
            if m := pat.fullmatch(sentence.strip()):
                return m.group("e")
    return None


def make_tools(search: Callable[[str, int], list[int]], passages: list[str], reader: Callable[[str, list[str]], Any],
               relations: dict[str, tuple[str, str]], generate: Callable[[np.ndarray, int], list[int]],
               costs: AgentCosts, vocab: int) -> dict[str, Callable[[dict, list], Any]]:
    """The agent's tools as pure functions fn(args, inputs) -> JSON value (Chapter 32's interface).

    search(query, k) -> passage ids (the sharded index); reader(question, passages) -> answer or None
    (``rag.read_answer``); relations: (fact, question) templates (``rag.RELATIONS``); generate(prompt, n)
    -> n token ids (the served decoder). ``respond`` is the side effect: the answer delivered to the user.
    """
    def retrieve(args: dict, inputs: list) -> dict:
        query = args["query"].format(*[x["answer"] for x in inputs])
        ids = [int(i) for i in search(query, args["k"]) if i >= 0]
        return {"ids": ids, "passages": [passages[i] for i in ids]}

    def read(args: dict, inputs: list) -> dict:
        entity = args["entity"] if args["entity"] is not None else inputs[1]["answer"]
        if entity is None:  # an earlier hop found nothing: nothing to read
            return {"answer": None}
        fact, question = relations[args["relation"]]
        found = (read_reverse(fact, entity, inputs[0]["passages"]) if args.get("reverse")
                 else reader(question.format(E=entity), inputs[0]["passages"]))
        if found is not None and args.get("strip"):
            found = found.removesuffix(args["strip"])
        return {"answer": found}

    def calculator(args: dict, inputs: list) -> dict:
        years = [x["answer"] for x in inputs]
        if any(y is None for y in years):
            return {"answer": None}
        a, b = (int(y) for y in years)
        if args["op"] == "earlier":
            return {"answer": args["names"][0] if a < b else args["names"][1]}
        return {"answer": str(abs(a - b))}

    def generate_tool(args: dict, inputs: list) -> dict:
        answer = inputs[0]["answer"]
        parts = [tokenize(args["question"], vocab, costs.question_tokens)]
        parts += [tokenize(p, vocab, costs.passage_tokens) for r in inputs[1:] for p in r["passages"]]
        parts.append(tokenize(str(answer), vocab, costs.answer_tokens))
        prompt = np.concatenate(parts)[:args["prompt_tokens"]]
        prompt = np.concatenate([prompt, np.zeros(args["prompt_tokens"] - len(prompt), np.int64)])
        tokens = [int(t) for t in generate(prompt, args["max_new"])]
        return {"answer": answer, "prompt": prompt.tolist(), "tokens": tokens}

    def respond(args: dict, inputs: list) -> dict:
        return {"session": args["session"], "answer": inputs[0]["answer"], "tokens": len(inputs[0]["tokens"])}

    return {"retrieve": retrieve, "read": read, "calculator": calculator, "generate": generate_tool,
            "respond": respond}
