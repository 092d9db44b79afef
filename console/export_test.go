package console

import "context"

// RefreshRound runs one round of Refresh and returns the pages it
// recomputed.
func (c *Console) RefreshRound(ctx context.Context) []string { return c.s.refreshRound(ctx) }

// WaitRefreshed waits until no background refresh of page runs.
func (c *Console) WaitRefreshed(ctx context.Context, page string) error {
	return c.s.caches[page].wait(ctx)
}

// APIPaths are the paths the API serves.
func (c *Console) APIPaths() []string { return c.s.apiPaths }
