//go:build !unix

package boundedfile

// Elsewhere (Windows) there are no FIFOs in the file system and no
// O_NOFOLLOW; ReadNoFollow is used only by the agent, which runs on Unix.
const (
	openFlags = 0
	noFollow  = 0
)

func isSymlinkRefused(error) bool { return false }
