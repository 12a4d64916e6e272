import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Self-made certificates for the test control plane, made with the openssl CLI (Node can
 * parse certificates but not issue them). P-256 keys: generated in milliseconds, and accepted
 * by Go, Node and kubectl alike. Valid for two days; every control plane makes its own.
 */
export interface KeyPair {
  readonly certFile: string;
  readonly keyFile: string;
}

export interface CertificateAuthority extends KeyPair {
  /** PEM text of the CA certificate, for kubeconfigs and TLS clients. */
  readonly certPem: string;
}

async function openssl(args: readonly string[]): Promise<void> {
  await run('openssl', args);
}

export async function generateEcKey(keyFile: string): Promise<void> {
  await openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', keyFile]);
}

export async function createCertificateAuthority(dir: string, commonName: string): Promise<CertificateAuthority> {
  const keyFile = join(dir, 'ca.key');
  const certFile = join(dir, 'ca.crt');
  await generateEcKey(keyFile);
  await openssl([
    'req',
    '-x509',
    '-new',
    '-key',
    keyFile,
    '-subj',
    `/CN=${commonName}`,
    '-days',
    '2',
    '-out',
    certFile,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
  ]);
  return { keyFile, certFile, certPem: await readFile(certFile, 'utf8') };
}

export interface LeafRequest {
  /** File name stem inside `dir`: `<name>.crt` and `<name>.key`. */
  readonly name: string;
  readonly commonName: string;
  /** Become the certificate's O= entries: Kubernetes reads them as the user's groups. */
  readonly organizations?: readonly string[];
  readonly usage: 'server' | 'client';
  /** Subject alternative names of a serving certificate, e.g. `IP:127.0.0.1`, `DNS:localhost`. */
  readonly altNames?: readonly string[];
}

export async function issueCertificate(dir: string, ca: CertificateAuthority, req: LeafRequest): Promise<KeyPair> {
  const keyFile = join(dir, `${req.name}.key`);
  const certFile = join(dir, `${req.name}.crt`);
  const csrFile = join(dir, `${req.name}.csr`);
  const extFile = join(dir, `${req.name}.ext`);
  await generateEcKey(keyFile);
  // Slashes and plus signs would break openssl's subject syntax; none of our names carry them.
  const subject = `/CN=${req.commonName}` + (req.organizations ?? []).map((o) => `/O=${o}`).join('');
  await openssl(['req', '-new', '-key', keyFile, '-subj', subject, '-out', csrFile]);
  const ext = [
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    `extendedKeyUsage=${req.usage === 'server' ? 'serverAuth' : 'clientAuth'}`,
    ...(req.altNames && req.altNames.length > 0 ? [`subjectAltName=${req.altNames.join(',')}`] : []),
  ];
  await writeFile(extFile, ext.join('\n') + '\n');
  await openssl(['x509', '-req', '-in', csrFile, '-CA', ca.certFile, '-CAkey', ca.keyFile, '-set_serial', String(randomInt(1, 2 ** 47)), '-days', '2', '-extfile', extFile, '-out', certFile]);
  return { keyFile, certFile };
}
