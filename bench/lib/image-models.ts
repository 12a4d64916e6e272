import { encodeOnnxModel, type OnnxGraph, type OnnxTensor } from '../../common/onnx-writer.js';

/**
 * The image models of bench:threads, built here, deterministically and without a download: a
 * stack of 3×3 convolutions (each with a ReLU, no padding) on a square image, then a global
 * average pool and a classifier. Weights and the image come from one seeded generator, so every
 * run feeds the same bytes and gets the same logits.
 */
export interface ImageModel {
  /** The model id it is served under. */
  id: string;
  /** Channels of the image, then of each convolution. */
  channels: number[];
  size: number;
  classes: number;
}

/** A real-size CNN: 1×3×224×224 FP32 in (602 KB), about 5.5 GFLOP a run. */
export const CNN: ImageModel = { id: 'cnn', channels: [3, 32, 64, 64], size: 224, classes: 1000 };

/**
 * A 1024×1024 one-channel image (4 MiB of FP32) through one light convolution: the tensor is
 * large and the run short, so what the replica adds per byte shows.
 */
export const LARGE_INPUT: ImageModel = { id: 'large-input', channels: [1, 16], size: 1024, classes: 10 };

/** The input's dims: one image. */
export function inputDims(m: ImageModel): number[] {
  return [1, m.channels[0] ?? 1, m.size, m.size];
}

/** Multiply-adds ×2 of the convolutions (each shrinks the image by 2) and the classifier. */
export function gflop(m: ImageModel): number {
  let macs = 0;
  for (let l = 1; l < m.channels.length; l++) macs += (m.channels[l] ?? 0) * (m.channels[l - 1] ?? 0) * 9 * (m.size - 2 * l) ** 2;
  return (2 * (macs + m.classes * (m.channels.at(-1) ?? 0))) / 1e9;
}

/** Deterministic values in [-0.05, 0.05). */
export function seeded(name: string, dims: number[], seed: number): OnnxTensor & { data: Float32Array } {
  const n = dims.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    data[i] = (s / 2 ** 32 - 0.5) * 0.1;
  }
  return { name, dims, data };
}

/** The image every run of `m` is fed. */
export function inputImage(m: ImageModel): Float32Array {
  return seeded('image', inputDims(m), 7).data;
}

export function imageModelBytes(m: ImageModel): Uint8Array {
  const { channels, classes } = m;
  const g: OnnxGraph = { name: m.id, nodes: [], initializers: [], inputs: [{ name: 'image', shape: inputDims(m) }], outputs: [{ name: 'logits', shape: [1, classes] }], opset: 17 };
  let x = 'image';
  for (let l = 1; l < channels.length; l++) {
    g.initializers.push(seeded(`w${l}`, [channels[l]!, channels[l - 1]!, 3, 3], l), seeded(`b${l}`, [channels[l]!], 10 + l));
    g.nodes.push({ opType: 'Conv', inputs: [x, `w${l}`, `b${l}`], outputs: [`c${l}`] }, { opType: 'Relu', inputs: [`c${l}`], outputs: [`r${l}`] });
    x = `r${l}`;
  }
  g.initializers.push(seeded('fc', [classes, channels.at(-1)!], 99), seeded('fcb', [classes], 100));
  g.nodes.push(
    { opType: 'GlobalAveragePool', inputs: [x], outputs: ['pooled'] },
    { opType: 'Flatten', inputs: ['pooled'], outputs: ['flat'] },
    { opType: 'Gemm', inputs: ['flat', 'fc', 'fcb'], outputs: ['logits'], intAttributes: { transB: 1 } },
  );
  return encodeOnnxModel(g);
}
