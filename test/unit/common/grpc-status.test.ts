import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { status } from '@grpc/grpc-js';
import { ERROR_CATALOGUE, ModelmuxError, type ErrorCode } from '../../../common/errors.js';
import { ERROR_CODE_TRAILER } from '../../../common/grpc/inference-service.js';
import { GRPC_STATUS_BY_HTTP, GRPC_STATUS_EXCEPTIONS, grpcError, grpcStatus } from '../../../common/grpc/status.js';
import { HEADER_OVERLOADED } from '../../../common/names.js';

const doc = readFileSync(join(process.cwd(), 'docs/errors.md'), 'utf8');
const grpcSection = doc.slice(doc.indexOf('# gRPC status codes'));
const name = (s: status): string => status[s];

describe('gRPC status codes', () => {
  it.each(Object.keys(ERROR_CATALOGUE) as ErrorCode[])('gives %s a status of its own HTTP status or an exception', (code) => {
    expect(GRPC_STATUS_EXCEPTIONS[code] ?? GRPC_STATUS_BY_HTTP[ERROR_CATALOGUE[code].status]).toBeDefined();
    expect(grpcStatus(code)).not.toBe(status.UNKNOWN);
    expect(grpcStatus(code)).not.toBe(status.OK);
  });

  it('maps the codes a gRPC client retries or backs off on as documented', () => {
    expect(grpcStatus('overloaded')).toBe(status.UNAVAILABLE);
    expect(grpcStatus('model_not_found')).toBe(status.NOT_FOUND);
    expect(grpcStatus('input_mismatch')).toBe(status.INVALID_ARGUMENT);
    expect(grpcStatus('timeout')).toBe(status.DEADLINE_EXCEEDED);
    expect(grpcStatus('cache_full')).toBe(status.RESOURCE_EXHAUSTED);
    expect(grpcStatus('pool_saturated')).toBe(status.RESOURCE_EXHAUSTED);
    expect(grpcStatus('internal')).toBe(status.INTERNAL);
  });

  it('documents in docs/errors.md exactly the table of common/grpc/status.ts', () => {
    const byHttp = [...grpcSection.matchAll(/^\| (\d{3}) \| ([A-Z_]+) \|$/gm)].map((m) => [Number(m[1]), m[2]]);
    expect(Object.fromEntries(byHttp)).toEqual(Object.fromEntries(Object.entries(GRPC_STATUS_BY_HTTP).map(([http, s]) => [Number(http), name(s)])));
    const exceptions = [...grpcSection.matchAll(/^\| `([a-z_]+)` \| ([A-Z_]+) \|/gm)].map((m) => [m[1], m[2]]);
    expect(Object.fromEntries(exceptions)).toEqual(Object.fromEntries(Object.entries(GRPC_STATUS_EXCEPTIONS).map(([code, s]) => [code, name(s)])));
  });

  it('sends the code in a trailer, and says a refusal before any work may go elsewhere', () => {
    const e = grpcError(new ModelmuxError('overloaded', 'full'), { 'x-request-id': 'r1' });
    expect(e.code).toBe(status.UNAVAILABLE);
    expect(e.details).toBe('full');
    expect(e.metadata).toEqual({ [ERROR_CODE_TRAILER]: 'overloaded', [HEADER_OVERLOADED]: 'true', 'x-request-id': 'r1' });
    expect(grpcError(new ModelmuxError('model_not_found', 'no')).metadata).toEqual({ [ERROR_CODE_TRAILER]: 'model_not_found' });
  });

  it('lets a router take a model that finds no device memory to another replica', () => {
    const e = grpcError(new ModelmuxError('device_memory_full', 'no room'));
    expect({ code: e.code, overloaded: e.metadata[HEADER_OVERLOADED] }).toEqual({ code: status.UNAVAILABLE, overloaded: 'true' });
    expect(grpcError(new ModelmuxError('model_too_large', 'never')).metadata[HEADER_OVERLOADED]).toBeUndefined();
  });
});
