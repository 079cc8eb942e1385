package realnet

import "strand/core/env"

// offlineDisk is a log directory that could not be opened before the core
// started (diskio.New failed, or strand serve could not read its
// meta.properties): every operation fails with err, which wraps env.ErrIO
// and the cause. The core's OpenManager fails on it at once, so the core
// starts the directory offline (log.FailedManager) and never writes to it.
type offlineDisk struct {
	err error
	// post runs a completion on the node's event loop, where env.Disk's
	// SyncDir must call done.
	post func(func())
}

func (d offlineDisk) MkdirAll(string) error                          { return d.err }
func (d offlineDisk) Open(string, env.OpenOptions) (env.File, error) { return nil, d.err }
func (d offlineDisk) List(string) ([]string, error)                  { return nil, d.err }
func (d offlineDisk) Rename(string, string) error                    { return d.err }
func (d offlineDisk) Remove(string) error                            { return d.err }
func (d offlineDisk) SyncDir(_ string, done func(error))             { d.post(func() { done(d.err) }) }
