package org.stampede;

import java.util.OptionalLong;

/**
 * A channel's disk tier could not write, sync, allocate or open its extents (a full disk, a missing
 * or unwritable directory). Nothing was lost; a put that needed the disk was refused.
 */
public final class StorageException extends StampedeException {
    private static final long serialVersionUID = 1L;

    StorageException(String message, String name, OptionalLong ts, String reason) {
        super(message, name, ts, reason);
    }
}
