import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';

/** Request options that make a client-node patch call send a JSON merge patch. */
export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The HTTP status of a failed client-node call (its ApiException's code), if any. */
export const statusCode = (err: unknown): number | undefined => (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'number' ? err.code : undefined);

export const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));
