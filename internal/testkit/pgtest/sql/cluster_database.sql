-- The database of a test's own cluster (NewCluster), migrated next.
CREATE DATABASE engagement
