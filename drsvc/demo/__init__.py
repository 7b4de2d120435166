"""``drsvc demo``: the whole service on the embedded default, with a disaster-recovery drill."""
