-- queue-process reads the number's throughput level afresh each run again.
DROP TABLE IF EXISTS engagement_number_throughput;
