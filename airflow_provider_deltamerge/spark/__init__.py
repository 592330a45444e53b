"""Everything done to Spark DataFrames: the session, reading the source, preparing and staging the
batch, the cursor filter, scd2 staging and alignment to the table's schema."""
