import type { FileMapper } from '../../../replica/onnx/file-map.js';
import { IdleMappings } from '../../../replica/onnx/idle-mappings.js';

/** Stands in for the native mapper: a buffer per map(), sized by the path's table, and a log. */
function fakeMapper(sizes: Record<string, number>) {
  const log: string[] = [];
  const names = new Map<ArrayBuffer, string>();
  const mapper: FileMapper = {
    map: (path) => {
      const b = new ArrayBuffer(sizes[path] ?? 0);
      names.set(b, path);
      log.push(`map ${path}`);
      return b;
    },
    unmap: (b) => {
      log.push(`unmap ${names.get(b) ?? '?'}`);
    },
  };
  return { mapper, log };
}

describe('IdleMappings', () => {
  it('gives a released mapping back to the next load of the same file, without mapping it again', () => {
    const { mapper, log } = fakeMapper({ a: 10, b: 10 });
    let reuses = 0;
    const idle = new IdleMappings(mapper, 100, () => reuses++);
    const a = idle.map('a');
    idle.unmap(a);
    expect(idle.parkedBytes).toBe(10);
    expect(idle.map('a')).toBe(a);
    expect(idle.map('b')).not.toBe(a);
    expect(log).toEqual(['map a', 'map b']);
    expect(reuses).toBe(1);
    expect(idle.parkedBytes).toBe(0);
  });

  it('unmaps the oldest parked mappings past its byte bound, and what is larger than the bound at once', () => {
    const { mapper, log } = fakeMapper({ a: 40, b: 40, c: 40, huge: 500 });
    const idle = new IdleMappings(mapper, 100);
    for (const p of ['a', 'b', 'c']) idle.unmap(idle.map(p));
    expect(log.slice(3)).toEqual(['unmap a']);
    expect(idle.parkedBytes).toBe(80);
    idle.unmap(idle.map('huge'));
    expect(log.slice(4)).toEqual(['map huge', 'unmap huge']);
    // b and c are still parked: loading them maps nothing.
    idle.map('b');
    idle.map('c');
    expect(log.length).toBe(6);
  });

  it('lets go of a file the store deletes, keeps one mapping of a file loaded twice, and is idempotent', () => {
    const { mapper, log } = fakeMapper({ a: 10 });
    const idle = new IdleMappings(mapper, 100);
    const first = idle.map('a');
    const second = idle.map('a'); // the first is still in use
    idle.unmap(first);
    idle.unmap(second);
    idle.unmap(first); // a second release of the same buffer changes nothing
    expect(log).toEqual(['map a', 'map a', 'unmap a']);
    expect(idle.parkedBytes).toBe(10);
    idle.forget('a');
    idle.forget('a');
    expect(log).toEqual(['map a', 'map a', 'unmap a', 'unmap a']);
    expect(idle.parkedBytes).toBe(0);
    idle.map('a');
    expect(log.at(-1)).toBe('map a');
  });

  it('unmaps, rather than parks, a buffer whose file was deleted while it was in use', () => {
    const { mapper, log } = fakeMapper({ a: 10 });
    const idle = new IdleMappings(mapper, 100);
    const a = idle.map('a');
    idle.forget('a'); // the disk cache evicted the file while its model was loaded
    idle.unmap(a);
    expect(log).toEqual(['map a', 'unmap a']);
    expect(idle.parkedBytes).toBe(0);
    // A later download at the same path (never, in practice) parks again.
    idle.unmap(idle.map('a'));
    expect(idle.parkedBytes).toBe(10);
  });

  it('counts a failed map as no use of the file', () => {
    let fail = true;
    const mapper: FileMapper = {
      map: () => {
        if (fail) throw Object.assign(new Error('gone'), { code: 'ENOENT' });
        return new ArrayBuffer(10);
      },
      unmap: () => undefined,
    };
    const idle = new IdleMappings(mapper, 100);
    expect(() => idle.map('a')).toThrow('gone');
    // Had the failed map counted as a use, this deletion would be remembered against the next one.
    idle.forget('a');
    fail = false;
    idle.unmap(idle.map('a'));
    expect(idle.parkedBytes).toBe(10);
  });

  it('with no room at all, unmaps every released buffer as the mapper alone would', () => {
    const { mapper, log } = fakeMapper({ a: 10 });
    const idle = new IdleMappings(mapper, 0);
    idle.unmap(idle.map('a'));
    idle.map('a');
    expect(log).toEqual(['map a', 'unmap a', 'map a']);
  });
});
