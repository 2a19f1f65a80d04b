"""The data a node holds: the files it reads, the data sets shipped with it, and its shard."""
