/**
 * Errors of Stampede's operations, one kind per error of every other client (Rust's
 * `stampede::Error`, Python's exception classes, C's `STP_` codes): a failed call rejects with a
 * {@link StampedeError} whose `kind` names it as Python does, and whose `message` is the text
 * every language shows for it (the node renders it).
 *
 * An aborted call rejects with its `AbortSignal`'s reason (a `DOMException` named `AbortError`
 * unless the caller gave another), as `fetch` does.
 */

/** Every kind of error an operation may fail with. */
export const ERROR_KINDS = [
  "BelowVisibility",
  "DuplicateTimestamp",
  "InvalidTimestamp",
  "Full",
  "NotAvailable",
  "AlreadyConsumed",
  "Reclaimed",
  "Closed",
  "NotFound",
  "AlreadyExists",
  "InvalidArgument",
  "Unreachable",
  "PermissionDenied",
  "Storage",
] as const;

/** One of {@link ERROR_KINDS}. */
export type ErrorKind = (typeof ERROR_KINDS)[number];

/** A failed operation: its kind, its message, and the fields the node sent with it. */
export class StampedeError extends Error {
  override readonly name = "StampedeError";

  constructor(
    /** What went wrong, named as in every other client. */
    readonly kind: ErrorKind,
    message: string,
    /** The error's fields as the node sent them (`op`, `name`, `ts`, `previous`, `next`, …). */
    readonly fields: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
  }
}

/** An `InvalidArgument` error raised by this client before anything is sent. */
export function invalidArgument(op: string, name: string, reason: string): StampedeError {
  return new StampedeError("InvalidArgument", `${op} on "${name}": ${reason}`, { op, name, reason });
}
