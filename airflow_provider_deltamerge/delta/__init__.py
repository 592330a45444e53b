"""Everything that touches Delta tables: the writer interface and its two implementations, the lock
that serialises table creation, and the store of the dataset's own tables."""
