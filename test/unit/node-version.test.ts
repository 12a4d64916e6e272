import { unsupportedNode } from '../../common/node-version.js';

describe('the Node.js versions modelmux starts on', () => {
  it('takes 24.11 and later in the 24 line, and 26 on', () => {
    for (const v of ['24.11.0', 'v24.22.3', '26.0.0', '26.12.1', '28.1.0']) expect(unsupportedNode(v)).toBeUndefined();
  });

  it('refuses older lines and odd ones with one message that says what to install', () => {
    for (const v of ['20.20.2', 'v22.1.0', '24.10.9', '25.2.0']) {
      const message = unsupportedNode(v);
      expect(message).toContain(v);
      expect(message).toMatch(/Node\.js 24\.11 .* or 26/);
      expect(message).toContain('install-node.sh 26');
    }
  });
});
