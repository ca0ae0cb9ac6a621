"""Plant known members into a model: cut a corpus into passages, split it at random
into members and non-members, fine-tune a base model on the members and save the
model with the labelled passages, so detection methods can be scored against truth.
"""

from copyprobe.plant.corpus import Passage, cut_passages, load_corpus, read_epub
from copyprobe.plant.split import split_passages

__all__ = ["Passage", "cut_passages", "load_corpus", "read_epub", "split_passages", "plant"]


def plant(*args, **kwargs):
    """See :func:`copyprobe.plant.finetune.plant` (imported lazily: it needs torch)."""
    from copyprobe.plant.finetune import plant as _plant

    return _plant(*args, **kwargs)
