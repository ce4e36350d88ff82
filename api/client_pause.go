package api

import (
	"context"
	"net/http"
)

// ReportPause tells the controller the worker's own pauses (the owner's,
// the host's rules).
func (c *Client) ReportPause(ctx context.Context, workerToken string, r WorkerPauseReport) (WorkerPauseResponse, error) {
	var out WorkerPauseResponse
	return out, c.call(ctx, http.MethodPut, "/api/workers/pause", r, &out, header{HeaderWorkerToken: workerToken})
}
