import { HEADER_RAY_MODEL_ID } from '../../common/names.js';
import { SAMPLE_WINE, wineForward, wineWeights } from '../../common/wine-model.js';

/**
 * One request checked against a reference before a system is measured, so a fast wrong answer
 * never counts as throughput. Throws with what came back when it is wrong.
 */
export async function checkPrediction(url: string, modelId: string, expected: number): Promise<void> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', [HEADER_RAY_MODEL_ID]: modelId },
    body: JSON.stringify({ instances: [SAMPLE_WINE] }),
    signal: AbortSignal.timeout(120_000),
  });
  const text = await res.text();
  let got: unknown;
  try {
    got = (JSON.parse(text) as { predictions?: unknown[][] }).predictions?.[0]?.[0];
  } catch {
    got = undefined;
  }
  if (res.status !== 200 || typeof got !== 'number' || Math.abs(got - expected) > 1e-3 * Math.max(1, Math.abs(expected))) {
    throw new Error(`wrong answer from ${url} for ${modelId}: HTTP ${res.status} ${text.slice(0, 300)} (expected predictions [[${expected}]])`);
  }
}

/** A wine model's answer against the reference forward pass (common/wine-model.ts). */
export async function checkAnswer(url: string, modelId: string, hidden: number): Promise<void> {
  await checkPrediction(url, modelId, wineForward(wineWeights(modelId, hidden), [SAMPLE_WINE])[0] ?? Number.NaN);
}
