# mutant: the chapter's windows through an import path a grep does not see
# loses: sessions, emitted_at, late, edge_cases, interleavings, correct_process, one_message, frames
import importlib


def session_windows(comm, owned, part, step, time, key, value, n_steps, gap, delta):
    st = importlib.import_module("scaleoutai.data.streaming")
    op = st.WindowOperator(int(gap), int(gap), int(delta))
    return [], op.dropped
