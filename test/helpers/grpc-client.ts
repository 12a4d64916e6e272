import { credentials, Metadata, type Client, type ServiceError } from '@grpc/grpc-js';
import { inferenceClient } from '../../common/grpc/inference-service.js';

/** A call's answer, or its failure with the trailers that carry modelmux's error code. */
export type GrpcAnswer<R> = { ok: true; value: R; trailers: Record<string, string> } | { ok: false; code: number; details: string; trailers: Record<string, string> };

/** An inference.GRPCInferenceService client (grpc-js, the proto modelmux serves) with promise calls. */
export interface InferenceClient {
  call<R>(
    method: 'ServerLive' | 'ServerReady' | 'ServerMetadata' | 'ModelReady' | 'ModelMetadata' | 'ModelInfer',
    request: unknown,
    options?: { deadlineMs?: number; metadata?: Record<string, string> },
  ): Promise<GrpcAnswer<R>>;
  close(): void;
}

const flat = (m: Metadata | undefined): Record<string, string> => Object.fromEntries(Object.entries(m?.getMap() ?? {}).map(([k, v]) => [k, String(v)]));

export function inferenceClientFor(address: string, options: Record<string, number> = {}): InferenceClient {
  const Client = inferenceClient();
  const client = new Client(address, credentials.createInsecure(), options) as Client & Record<string, (...args: unknown[]) => { on(event: 'status', f: (s: { metadata: Metadata }) => void): void }>;
  return {
    call<R>(method: string, request: unknown, o: { deadlineMs?: number; metadata?: Record<string, string> } = {}): Promise<GrpcAnswer<R>> {
      const metadata = new Metadata();
      for (const [k, v] of Object.entries(o.metadata ?? {})) metadata.set(k, v);
      return new Promise((resolve) => {
        let value: R | undefined;
        let failure: ServiceError | undefined;
        let settled = false;
        const call = client[method]!(request, metadata, { deadline: Date.now() + (o.deadlineMs ?? 20_000) }, (err: ServiceError | null, v: R) => {
          if (err) {
            failure = err;
            // A failed call's trailers are its error's metadata; no status event may follow it.
            settled = true;
            resolve({ ok: false, code: err.code, details: err.details, trailers: flat(err.metadata) });
          } else value = v;
        });
        call.on('status', (s) => {
          if (!settled && failure === undefined) resolve({ ok: true, value: value as R, trailers: flat(s.metadata) });
        });
      });
    },
    close: () => client.close(),
  };
}
