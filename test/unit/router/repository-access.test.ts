import { bearerToken, publicRepositoryAccess, REPOSITORY_OPEN } from '../../../router/routes/repository-access.js';

const TOKEN = 'k3y-0f-the-repository-api_x';

describe('who may call the model repository API', () => {
  it('lets everyone in on the admin port', () => {
    expect(REPOSITORY_OPEN.refusal([])).toBeUndefined();
  });

  it('refuses everyone on the public port without a token, naming where to go instead', () => {
    const refused = publicRepositoryAccess(undefined, 8002).refusal(['Authorization', `Bearer ${TOKEN}`]);
    expect([refused?.code, refused?.status]).toEqual(['repository_api_disabled', 403]);
    expect(refused?.message).toContain('admin port (8002)');
    expect(publicRepositoryAccess(undefined, -1).refusal([])?.message).toContain('--admin-port=-1');
  });

  it('with a token, lets in only the caller that sends it as a Bearer credential', () => {
    const access = publicRepositoryAccess(TOKEN, 8002);
    expect(access.refusal(['Authorization', `Bearer ${TOKEN}`])).toBeUndefined();
    expect(access.refusal(['authorization', `bearer  ${TOKEN} `])).toBeUndefined();
    for (const headers of [
      [],
      ['Authorization', `Bearer ${TOKEN}x`],
      ['Authorization', `Bearer ${TOKEN.slice(1)}`],
      ['Authorization', `Basic ${TOKEN}`],
      ['Authorization', TOKEN],
      ['X-Token', `Bearer ${TOKEN}`],
    ]) {
      const refused = access.refusal(headers);
      expect([refused?.code, refused?.status]).toEqual(['repository_api_unauthorized', 401]);
      expect(refused?.message).not.toContain(TOKEN);
    }
  });

  it('reads no token from two Authorization headers, even if one holds it', () => {
    expect(bearerToken(['Authorization', `Bearer ${TOKEN}`, 'authorization', 'Bearer other'])).toBeUndefined();
    expect(publicRepositoryAccess(TOKEN, 8002).refusal(['Authorization', `Bearer ${TOKEN}`, 'Authorization', `Bearer ${TOKEN}`])?.code).toBe('repository_api_unauthorized');
  });
});
