"""The HTML error pages that Cloudflare (or the nginx behind it) shows instead of an API's JSON."""

from __future__ import annotations

from simulations.fakes.reply import Reply

NGINX_TITLES = {
    413: "413 Request Entity Too Large",
    502: "502 Bad Gateway",
    503: "503 Service Temporarily Unavailable",
    504: "504 Gateway Time-out",
}
CLOUDFLARE = {
    520: "Web server is returning an unknown error",
    521: "Web server is down",
    522: "Connection timed out",
    523: "Origin is unreachable",
    524: "A timeout occurred",
}


def html_reply(host: str, ray: str, status: int, delay: float = 0.0) -> Reply:
    """The page Cloudflare (or the nginx behind it) shows instead of the API's JSON, for the
    API at `host` (its dialect's HOST), with the Ray ID `ray` in the page and its headers."""
    if status in CLOUDFLARE:
        title = f"{host} | {status}: {CLOUDFLARE[status]}"
        page = (
            '<!DOCTYPE html>\n<html lang="en-US">\n<head>\n<title>' + title + "</title>\n"
            '<meta charset="UTF-8" />\n</head>\n<body>\n<div id="cf-error-details">\n'
            f'<h1><span class="inline-block">{CLOUDFLARE[status]}</span>\n'
            f'<span class="code-label">Error code {status}</span></h1>\n'
            f"<p>Cloudflare Ray ID: <strong>{ray}</strong></p>\n</div>\n</body>\n</html>\n"
        )
    else:
        title = NGINX_TITLES.get(status, f"{status} Error")
        page = (
            f"<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1>"
            "</center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n"
        )
    headers = [("content-type", "text/html"), ("server", "cloudflare"), ("cf-ray", ray)]
    return Reply(status, headers, page.encode(), head_delay=delay)
