"""Part VI, Distributed AI and Multi-Agent Systems (Chapters 27-32): the modules a chapter of Part VI teaches.

NumPy, the communicator and the shared layers only: every agent is a rank, so the messages, bytes and
simulated time of every protocol are counted like a collective's, and crashes and lost messages come
from ``cluster.Faults``. The production libraries (Ray actors, nashpy, OpenSpiel, mesa, PettingZoo,
pyswarms, LangGraph) run beside these in the chapters and the tests.

    dai            Ch27  contract net (announce, bid, award, re-announce after a crash), asynchronous
                         backtracking and distributed breakout on graph colouring, a blackboard
    games          Ch28  normal-form games, best responses, Nash equilibria (support enumeration, Lemke-Howson),
                         fictitious play, regret matching (also as a protocol, a player per rank), CFR on Kuhn poker
    mas            Ch29  alternating-offers negotiation, first-price, second-price and VCG auctions, consensus
                         among agents with crashes
    marl           Ch30  independent Q-learners, a centralised critic with decentralised actors, self-play
    swarm          Ch31  boids, particle swarm optimisation with sub-swarms on ranks, average consensus on graphs,
                         MAX-MIN ant colonies on ranks for the TSP with Held-Karp as the exact reference
    orchestration  Ch32  planner and worker agents over a task graph: tool calls, retries with idempotency keys,
                         timeouts, checkpoint and resume

Each chapter's module names its companions (split to keep files small): ``dai_csp``, ``dai_rounds``,
``dai_blackboard`` and ``dai_ray`` (Ch27); ``equilibria`` and ``cfr`` (Ch28); ``auctions`` (Ch29);
``marl_iql``, ``marl_coma``, ``marl_critic``, ``marl_protocol``, ``marl_envs`` (re-exporting ``marl_games`` and
``marl_pettingzoo``) and ``marl_selfplay`` (Ch30); ``swarm_pso``, ``swarm_consensus``, ``swarm_aco`` and ``tsp`` (Ch31);
``orchestration_plan``, ``orchestration_tools`` and ``orchestration_langgraph`` (Ch32).
"""
