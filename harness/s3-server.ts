import { setTimeout as sleep } from 'node:timers/promises';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { freePorts } from '../cli/local-processes.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CreateBucketCommand, HeadObjectCommand, ListBucketsCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';

const execFileP = promisify(execFile);

/** Re-exported for tests that start their own servers beside the store. */
export { freePorts };

/** A running S3-compatible server (SeaweedFS's S3 gateway) for one test file or one benchmark run. */
export interface S3Server {
  /** e.g. `http://127.0.0.1:41234`; path-style addressing. */
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Created empty at start. */
  bucket: string;
  /** Env a child process needs to reach the server through the standard AWS credential chain. */
  awsEnv: Record<string, string>;
  /** A client for the test itself (path-style, the known credentials). */
  client: S3Client;
  put(key: string, body: Uint8Array): Promise<void>;
  /** Everything the server printed, for failure messages. */
  logs(): string;
  /**
   * SeaweedFS's own Prometheus metrics (`SeaweedFS_s3_request_total{bucket,code,type}`), where
   * `type="LIST"` with the bucket's name counts ListObjects; undefined unless asked for with `metrics`.
   */
  readonly metricsUrl: string | undefined;
  /** The `weed server` process (master, volume, filer and gateway in one), for its CPU. */
  readonly pid: number | undefined;
  /** An outage: kills the server (SIGKILL, so its connections are cut) and keeps its data. */
  interrupt(): Promise<void>;
  /** Ends an outage: starts the server again on the same ports and data, and waits until it serves what it held. */
  resume(): Promise<void>;
  stop(): Promise<void>;
}

export interface S3ServerOptions {
  bucket?: string;
  /** How long to wait for the gateway to answer. */
  startTimeoutMs?: number;
  /** Serve the server's Prometheus metrics (see S3Server.metricsUrl). */
  metrics?: boolean;
  /** Volumes (256 MB each) the server may make; default 20. The benchmarks' 10,000-model stores want more. */
  maxVolumes?: number;
}

/** Resolves (and builds on the first call) the `weed` binary through test/tools/build-seaweedfs.sh, from the project root (the working folder of jest and of the npm scripts). */
export async function seaweedBinary(): Promise<string> {
  if (process.env.MODELMUX_WEED) return process.env.MODELMUX_WEED;
  const script = join(process.cwd(), 'test/tools/build-seaweedfs.sh');
  const { stdout } = await execFileP('bash', [script], { maxBuffer: 16 * 1024 * 1024, timeout: 30 * 60 * 1000 });
  const lines = stdout.trim().split('\n');
  const path = lines[lines.length - 1];
  if (!path) throw new Error('build-seaweedfs.sh printed no path');
  return path;
}

/**
 * Starts `weed server -s3` on 127.0.0.1 with free ports in a temp dir, one admin identity with
 * known credentials, and an empty bucket. Telemetry is off: nothing leaves the machine.
 */
export async function startS3Server(options: S3ServerOptions = {}): Promise<S3Server> {
  const weed = await seaweedBinary();
  const dir = await mkdtemp(join(tmpdir(), 'modelmux-s3-'));
  const accessKeyId = 'modelmuxtestaccess';
  const secretAccessKey = 'modelmuxtestsecret0123456789';
  const region = 'us-east-1';
  const bucket = options.bucket ?? 'models';
  const config = {
    identities: [{ name: 'admin', credentials: [{ accessKey: accessKeyId, secretKey: secretAccessKey }], actions: ['Admin', 'Read', 'List', 'Tagging', 'Write'] }],
  };
  const configPath = join(dir, 's3.json');
  await writeFile(configPath, JSON.stringify(config));
  const [master, masterGrpc, volume, volumeGrpc, filer, filerGrpc, s3, s3Grpc, metricsPort] = await freePorts(9);
  const args = [
    'server',
    '-ip=127.0.0.1',
    '-ip.bind=127.0.0.1',
    `-dir=${dir}`,
    `-master.port=${master}`,
    `-master.port.grpc=${masterGrpc}`,
    '-master.telemetry=false',
    '-master.volumeSizeLimitMB=256',
    `-volume.port=${volume}`,
    `-volume.port.grpc=${volumeGrpc}`,
    `-volume.max=${options.maxVolumes ?? 20}`,
    `-filer.port=${filer}`,
    `-filer.port.grpc=${filerGrpc}`,
    `-filer.localSocket=${join(dir, 'filer.sock')}`,
    '-s3',
    `-s3.port=${s3}`,
    `-s3.port.grpc=${s3Grpc}`,
    '-s3.port.iceberg=0',
    '-s3.port.lance=0',
    `-s3.localSocket=${join(dir, 's3.sock')}`,
    `-s3.config=${configPath}`,
    ...(options.metrics === true ? [`-metricsPort=${metricsPort}`] : []),
  ];
  let output = '';
  const append = (b: Buffer): void => {
    output += b.toString();
    if (output.length > 1_000_000) output = output.slice(-500_000);
  };
  let child: ChildProcess;
  let exited = false;
  let exit: Promise<void>;
  const launch = (): void => {
    exited = false;
    child = spawn(weed, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.on('data', append);
    child.stderr?.on('data', append);
    const c = child;
    exit = new Promise<void>((resolve) =>
      c.once('exit', () => {
        exited = true;
        resolve();
      }),
    );
  };
  launch();

  const endpoint = `http://127.0.0.1:${s3}`;
  const client = new S3Client({ endpoint, region, forcePathStyle: true, credentials: { accessKeyId, secretAccessKey } });

  const stop = async (): Promise<void> => {
    client.destroy();
    if (!exited) {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exit;
      clearTimeout(killer);
    }
    await rm(dir, { recursive: true, force: true });
  };

  /**
   * Until the gateway answers and its filer finds the volumes: the probe object reads back. Asked
   * through a client of its own, with no connection left from before the outage, so that the
   * time this takes is the server's alone.
   */
  const waitServing = async (deadline: number): Promise<void> => {
    const probe = new S3Client({ endpoint, region, forcePathStyle: true, credentials: { accessKeyId, secretAccessKey }, maxAttempts: 1 });
    try {
      for (;;) {
        if (exited) throw new Error(`weed exited during restart:\n${output.slice(-4000)}`);
        try {
          await probe.send(new HeadObjectCommand({ Bucket: bucket, Key: '.modelmux-probe' }));
          return;
        } catch (err) {
          if (Date.now() > deadline) throw new Error(`S3 server not serving after restart (${String(err)}):\n${output.slice(-4000)}`, { cause: err });
          await sleep(100);
        }
      }
    } finally {
      probe.destroy();
    }
  };

  try {
    const deadline = Date.now() + (options.startTimeoutMs ?? 60_000);
    for (;;) {
      if (exited) throw new Error(`weed exited during start:\n${output.slice(-4000)}`);
      try {
        await client.send(new ListBucketsCommand({}));
        break;
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`S3 gateway not ready after timeout (${String(err)}):\n${output.slice(-4000)}`, { cause: err });
        await sleep(200);
      }
    }
    // The filer may still be finding its volume servers: retry the first write a little.
    for (let attempt = 0; ; attempt++) {
      try {
        await client.send(new CreateBucketCommand({ Bucket: bucket }));
        await client.send(new PutObjectCommand({ Bucket: bucket, Key: '.modelmux-probe', Body: new Uint8Array([1]) }));
        break;
      } catch (err) {
        if (Date.now() > deadline || exited) throw new Error(`cannot create bucket ${bucket} (${String(err)}):\n${output.slice(-4000)}`, { cause: err });
        await sleep(250 * Math.min(attempt + 1, 4));
      }
    }
  } catch (err) {
    await stop();
    throw err;
  }

  return {
    endpoint,
    region,
    accessKeyId,
    secretAccessKey,
    bucket,
    awsEnv: { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey, AWS_REGION: region },
    client,
    put: async (key, body) => {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
    },
    logs: () => output,
    metricsUrl: options.metrics === true ? `http://127.0.0.1:${metricsPort}/metrics` : undefined,
    get pid() {
      return child.pid;
    },
    interrupt: async () => {
      child.kill('SIGKILL');
      await exit;
    },
    resume: async () => {
      launch();
      await waitServing(Date.now() + (options.startTimeoutMs ?? 60_000));
    },
    stop,
  };
}
