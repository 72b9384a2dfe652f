set $subdomain 'customer';

if ( $request_uri ~ /(api|admin|setup|customer)  ) {
  set $subdomain $1;
}

location ~ /(api|admin|setup|customer)$ {
  rewrite ^(.*[^/])$ $1/ permanent;
}

location ~ ^/assets/(.+)$ {
  proxy_pass $scheme://$subdomain.$host/assets/$1;
  proxy_redirect off;
  proxy_set_header Host $host;
}

location ~ /(api|admin|setup|customer)/?(.*)$ {
  proxy_pass $scheme://$1.$host/$2;
  proxy_redirect off;
  proxy_set_header Host $host;
}

location ~ ^/?$ {
  rewrite ^ /customer permanent;
}
