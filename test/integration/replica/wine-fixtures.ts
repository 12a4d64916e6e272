export { expected, v2Body, wineRows } from '../../../harness/wine-requests.js';

export interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await r.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { raw: text };
  }
  return { status: r.status, headers: r.headers, body: parsed };
}

export async function get(url: string): Promise<Answer> {
  const r = await fetch(url);
  return { status: r.status, headers: r.headers, body: (await r.json()) as Record<string, unknown> };
}

/** The quality column of a V2 answer. */
export function v2Outputs(a: Answer): number[] {
  const outputs = a.body.outputs as { name: string; data: number[]; shape: number[] }[];
  return outputs[0]?.data ?? [];
}

export function predictions(a: Answer): number[] {
  return (a.body.predictions as number[][]).map((row) => row[0] ?? NaN);
}

/** float32 inference against the float64 reference. */
export function expectClose(actual: readonly number[], wanted: readonly number[]): void {
  expect(actual).toHaveLength(wanted.length);
  actual.forEach((v, i) => expect(Math.abs(v - (wanted[i] ?? NaN))).toBeLessThan(1e-3 * Math.max(1, Math.abs(wanted[i] ?? 0))));
}
