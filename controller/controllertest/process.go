package controllertest

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"time"
)

var listeningOn = regexp.MustCompile(`listening on (https?://[0-9.:]+)`)

// Listening reads a controller process's log (its stderr) from r into log
// until the controller says it is listening, and returns the URL it gave.
// It goes on copying r into log afterwards, so the process never blocks on
// a full pipe. It fails when r ends first, or when within passes; log then
// holds what the controller said.
func Listening(r io.Reader, log io.Writer, within time.Duration) (string, error) {
	urls := make(chan string, 1)
	go func() {
		defer close(urls)
		sc := bufio.NewScanner(r)
		found := false
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			if m := listeningOn.FindStringSubmatch(sc.Text()); m != nil && !found {
				found = true
				urls <- m[1]
			}
		}
	}()
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case u, ok := <-urls:
		if !ok {
			return "", fmt.Errorf("the controller's log ended before it said %q", "listening on")
		}
		return u, nil
	case <-t.C:
		return "", fmt.Errorf("the controller did not say %q within %s", "listening on", within)
	}
}
