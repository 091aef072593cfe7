"""wsgi_app.py: the WSGI application run_lighttpd.sh (behind gunicorn) and run_uwsgi.sh
serve, copied by each with @SERVER@ set to its server's name: it says which server saw
which request (method, path, query) and the length and md5 of the body it read."""
import hashlib


def application(environ, start_response):
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    out = "@SERVER@ saw %s %s?%s, %d bytes, md5 %s\n" % (
        environ["REQUEST_METHOD"], environ["PATH_INFO"], environ["QUERY_STRING"],
        len(body), hashlib.md5(body).hexdigest())
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(out)))])
    return [out.encode()]
