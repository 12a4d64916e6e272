import { errorHeaders } from '../../../router/http1/error-headers.js';

describe('errorHeaders', () => {
  it('asks a client to wait where waiting helps, and closes where the body was left unread', () => {
    expect(errorHeaders('buffer_full')).toEqual(['retry-after', '1', 'connection', 'close']);
    expect(errorHeaders('pool_saturated')).toEqual(['retry-after', '1']);
    expect(errorHeaders('no_replicas')).toEqual(['retry-after', '1']);
    expect(errorHeaders('body_too_large')).toEqual(['connection', 'close']);
    expect(errorHeaders('request_timeout')).toEqual(['connection', 'close']);
    expect(errorHeaders('composite_saturated')).toEqual(['retry-after', '1', 'connection', 'close']);
    expect(errorHeaders('composite_client_limit')).toEqual(['retry-after', '1', 'connection', 'close']);
    expect(errorHeaders('composite_member_limit')).toEqual([]);
    expect(errorHeaders('model_not_found')).toEqual([]);
  });

  it('names the scheme of the credential a refused repository call lacks', () => {
    expect(errorHeaders('repository_api_unauthorized')).toEqual(['www-authenticate', 'Bearer realm="modelmux-repository"']);
    expect(errorHeaders('repository_api_disabled')).toEqual([]);
  });
});
