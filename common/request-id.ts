/**
 * A request id passed on as given (`x-request-id`), by router and replica alike: bounded and
 * printable, so it cannot break a log line, and wide enough for the ids clients make (UUIDs,
 * `trace@span`, base64url). One rule, so a router's id is the replica's too: `abc@1` was
 * replaced in the replica's logs when the two differed.
 */
export const REQUEST_ID = /^[A-Za-z0-9._:@=+-]{1,128}$/;

/** `given` when it is a valid request id, else undefined (the caller makes its own). */
export function acceptedRequestId(given: string | undefined): string | undefined {
  return given !== undefined && REQUEST_ID.test(given) ? given : undefined;
}
