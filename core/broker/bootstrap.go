package broker

import (
	"errors"
	"fmt"
	"path"

	"strand/core/env"
	"strand/core/log/checkpoint"
	"strand/core/metadata"
)

// bootstrapPath is where `strand format --add-scram` writes the bootstrap
// records, beside the metadata log in the first log directory, as
// kafka-storage.sh writes bootstrap.checkpoint into the metadata log
// directory.
var bootstrapPath = path.Join(metadataLogDir, metadata.BootstrapFileName)

// readBootstrap reads the controller's bootstrap records (KIP-900): none
// without the file; a file that does not decode refuses the start, as a
// cluster formatted with credentials must not start without them.
func readBootstrap(disk env.Disk) ([]metadata.Record, error) {
	data, err := checkpoint.ReadFile(disk, bootstrapPath)
	if errors.Is(err, env.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("broker: read %s: %w", bootstrapPath, err)
	}
	records, err := metadata.DecodeBootstrap(data)
	if err != nil {
		return nil, fmt.Errorf("broker: %s: %w", bootstrapPath, err)
	}
	return records, nil
}
