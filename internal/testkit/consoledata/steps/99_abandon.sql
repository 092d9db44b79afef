-- A load that failed leaves no staging schema behind: best effort, the
-- connection may be what failed.
DROP SCHEMA IF EXISTS consoledata CASCADE
