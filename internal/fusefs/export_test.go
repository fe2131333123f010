package fusefs

import "github.com/uetrace/uetrace/internal/fusefs/fuse"

// ConnStats is the tree's connection's fuse.Stats, for tests.
func ConnStats(t *Tree) fuse.Stats { return t.conn.Stats() }
