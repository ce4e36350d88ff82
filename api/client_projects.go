package api

import (
	"context"
	"net/http"
	"net/url"
)

// SetVariableRequest is the body of POST /api/projects/:project/env: one
// variable, created or replaced in each of Environments (development,
// preview and production when empty). A file variable's Value is the
// file's content, base64-encoded.
type SetVariableRequest struct {
	Name         string   `json:"name"`
	Value        string   `json:"value"`
	Visibility   string   `json:"visibility"`
	Type         string   `json:"type,omitempty"` // string (default) or file
	Environments []string `json:"environments,omitempty"`
}

// SetCredentialRequest is the body of PUT
// /api/projects/:project/credentials/:platform/:name: the keystore (kept
// sealed, never returned) and what identifies it, as the CLI computed it.
type SetCredentialRequest struct {
	Android *AndroidKeystore `json:"android"`
	Info    *KeystoreInfo    `json:"info"`
}

func projectPath(project string) string { return "/api/projects/" + url.PathEscape(project) }

// SetVariable creates or replaces a project's variable in its environments
// (developer); the answer lists what was set, secret values left out.
func (c *Client) SetVariable(ctx context.Context, project string, req SetVariableRequest) (VariableList, error) {
	var out VariableList
	return out, c.call(ctx, http.MethodPost, projectPath(project)+"/env", req, &out, nil)
}

// ListVariables lists a project's variables in one environment, or in all
// when environment is ""; secret values are never returned (developer).
func (c *Client) ListVariables(ctx context.Context, project, environment string) (VariableList, error) {
	var out VariableList
	path := projectPath(project) + "/env"
	if environment != "" {
		path += "?environment=" + url.QueryEscape(environment)
	}
	return out, c.call(ctx, http.MethodGet, path, nil, &out, nil)
}

// DeleteVariable deletes a project's variable from one environment, or from
// all when environment is "" (developer); 404 when nothing matched.
func (c *Client) DeleteVariable(ctx context.Context, project, name, environment string) error {
	path := projectPath(project) + "/env/" + url.PathEscape(name)
	if environment != "" {
		path += "?environment=" + url.QueryEscape(environment)
	}
	return c.call(ctx, http.MethodDelete, path, nil, nil, nil)
}

func credentialPath(project, platform, name string) string {
	return projectPath(project) + "/credentials/" + url.PathEscape(platform) + "/" + url.PathEscape(name)
}

// SetCredential stores (or replaces) a project's signing credential on the
// farm (developer); the answer identifies it by fingerprint.
func (c *Client) SetCredential(ctx context.Context, project, platform, name string, req SetCredentialRequest) (Credential, error) {
	var out Credential
	return out, c.call(ctx, http.MethodPut, credentialPath(project, platform, name), req, &out, nil)
}

// ListCredentials lists a project's farm credentials by fingerprint (developer).
func (c *Client) ListCredentials(ctx context.Context, project string) (CredentialList, error) {
	var out CredentialList
	return out, c.call(ctx, http.MethodGet, projectPath(project)+"/credentials", nil, &out, nil)
}

// DeleteCredential deletes a project's farm credential (developer).
func (c *Client) DeleteCredential(ctx context.Context, project, platform, name string) error {
	return c.call(ctx, http.MethodDelete, credentialPath(project, platform, name), nil, nil, nil)
}

// ListPools lists the pools (admin).
func (c *Client) ListPools(ctx context.Context) (PoolList, error) {
	var out PoolList
	return out, c.call(ctx, http.MethodGet, "/api/pools", nil, &out, nil)
}

// SetPool records whether a pool is trusted and allows the local driver
// for credentialed builds (admin).
func (c *Client) SetPool(ctx context.Context, p Pool) (Pool, error) {
	var out Pool
	return out, c.call(ctx, http.MethodPut, "/api/pools/"+url.PathEscape(p.Name), p, &out, nil)
}

// SetProjectPools replaces the pools a project's builds may use; none:
// any (admin).
func (c *Client) SetProjectPools(ctx context.Context, project string, pools []string) (ProjectPools, error) {
	var out ProjectPools
	return out, c.call(ctx, http.MethodPut, "/api/projects/"+url.PathEscape(project)+"/pools", ProjectPools{Pools: pools}, &out, nil)
}

// Queue returns the first page of pending builds the key may see, with
// why each waits.
func (c *Client) Queue(ctx context.Context) (Queue, error) {
	var out Queue
	return out, c.call(ctx, http.MethodGet, "/api/queue", nil, &out, nil)
}
