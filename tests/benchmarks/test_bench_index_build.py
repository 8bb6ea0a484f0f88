"""The index-build benchmark's padding measure."""

from __future__ import annotations

import numpy as np

from benchmarks.index_build.run import real_token_share


def test_real_token_share_counts_padding_to_each_batch_longest() -> None:
    lengths = np.array([5, 1, 4, 2])
    # batches (5, 1) and (4, 2): 10 + 8 tokens computed for 12 real ones
    assert real_token_share(lengths, np.array([0, 1, 2, 3]), 2) == 12 / 18
    # longest first: (5, 4) and (2, 1): 10 + 4
    assert real_token_share(lengths, np.array([0, 2, 3, 1]), 2) == 12 / 14
    assert real_token_share(lengths, np.array([0, 2, 3, 1]), 4) == 12 / 20
    # a last batch shorter than the others: (5, 4, 2) and (1)
    assert real_token_share(lengths, np.array([0, 2, 3, 1]), 3) == 12 / 16


def test_st_backends_writes_the_index_build_texts_for_the_other_environment(tmp_path) -> None:
    import json

    import pytest

    from benchmarks.harness.texts import shakespeare_sentences
    from benchmarks.index_build import st_backends

    out = tmp_path / "texts.json"
    assert st_backends.main(["--write-texts", str(out), "--n", "20"]) == 0
    assert json.loads(out.read_text()) == shakespeare_sentences(20, 0)
    with pytest.raises(SystemExit):  # a measuring run needs its texts, model and output
        st_backends.main(["--texts", str(out)])
